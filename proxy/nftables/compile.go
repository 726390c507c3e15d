package nftables

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// This file compiles the rule text of a plan (the nft syntax that --dump,
// the packet tracer and the golden files show) into the netlink
// expressions the kernel runs, exactly as nft 1.0 would (`nft
// --debug=netlink` is the reference: the same registers, byte orders and
// anonymous sets, so that `nft list table` prints a netlink-programmed
// table and a text-programmed one identically; TestNetlinkMatchesNFT
// checks it). The netlink apply layer has no other source of rules: text
// and kernel state cannot drift. The grammar is the one the plan writes,
// nothing more; anything else is an error, never a guess.

// anonSetFunc adds an anonymous set to the batch before the rule that
// uses it and returns it with its name and ID filled in.
type anonSetFunc func(s *gnft.Set, elems []gnft.SetElement) (*gnft.Set, error)

// compiler turns one family's rule text into expressions.
type compiler struct {
	v6      bool
	addrLen uint32
	table   *gnft.Table
	anon    anonSetFunc
}

func newCompiler(v6 bool, table *gnft.Table, anon anonSetFunc) *compiler {
	c := &compiler{v6: v6, addrLen: 4, table: table, anon: anon}
	if v6 {
		c.addrLen = 16
	}
	return c
}

// tokens splits rule text on blanks; commas are tokens of their own
// ("{ a, b }" and "{ a,b }" are both written).
func tokens(rule string) []string {
	return strings.Fields(strings.ReplaceAll(rule, ",", " , "))
}

// field is one packet field of a lookup key or match.
type field struct {
	name string // "saddr", "daddr", "l4proto", "dport"
}

// ruleState carries the position in the token list and the output.
type ruleState struct {
	toks []string
	i    int
	out  []expr.Any
}

func (s *ruleState) peek(n int) string {
	if s.i+n < len(s.toks) {
		return s.toks[s.i+n]
	}
	return ""
}

func (s *ruleState) next() string {
	t := s.peek(0)
	s.i++
	return t
}

func (s *ruleState) expect(words ...string) error {
	for _, w := range words {
		if got := s.next(); got != w {
			return fmt.Errorf("expected %q, got %q", w, got)
		}
	}
	return nil
}

// compile returns the expressions of rule.
func (c *compiler) compile(rule string) ([]expr.Any, error) {
	s := &ruleState{toks: tokens(rule)}
	for s.i < len(s.toks) {
		if err := c.statement(s); err != nil {
			return nil, fmt.Errorf("rule %q: %w", rule, err)
		}
	}
	return s.out, nil
}

func (c *compiler) ipX() string {
	if c.v6 {
		return "ip6"
	}
	return "ip"
}

// statement compiles one match or action.
func (c *compiler) statement(s *ruleState) error {
	switch t := s.peek(0); {
	case t == "ct":
		return c.ct(s)
	case t == c.ipX() || (t == "meta" && s.peek(2) == "."):
		return c.addrOrConcat(s)
	case t == "meta":
		return c.l4protoMatch(s)
	case t == "fib":
		return c.fib(s)
	case t == "mark":
		return c.mark(s)
	case t == "masquerade":
		s.next()
		m := &expr.Masq{}
		if s.peek(0) == "fully-random" {
			s.next()
			m.FullyRandom = true
		}
		s.out = append(s.out, m)
		return nil
	case t == "dnat":
		return c.dnat(s)
	case t == "numgen" || t == "jhash":
		return c.genVmapOrMatch(s)
	case t == "update":
		return c.update(s)
	case t == "reject":
		s.next()
		code := uint8(3) // ICMP port unreachable
		if c.v6 {
			code = 4 // ICMPv6 port unreachable
		}
		s.out = append(s.out, &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code})
		return nil
	default:
		v, err := c.verdict(s)
		if err != nil {
			return err
		}
		s.out = append(s.out, v)
		return nil
	}
}

// verdict parses drop, accept, jump CHAIN or goto CHAIN.
func (c *compiler) verdict(s *ruleState) (*expr.Verdict, error) {
	switch t := s.next(); t {
	case "drop":
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case "accept":
		return &expr.Verdict{Kind: expr.VerdictAccept}, nil
	case "jump":
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: s.next()}, nil
	case "goto":
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: s.next()}, nil
	default:
		return nil, fmt.Errorf("unknown statement %q", t)
	}
}

func native32(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}

// ct compiles "ct state new" and "ct status dnat": a bit test.
func (c *compiler) ct(s *ruleState) error {
	s.next()
	var key expr.CtKey
	var bit uint32
	switch w := s.next() + " " + s.next(); w {
	case "state new":
		key, bit = expr.CtKeySTATE, 0x08
	case "status dnat":
		key, bit = expr.CtKeySTATUS, 0x20
	default:
		return fmt.Errorf("unsupported ct match %q", w)
	}
	s.out = append(s.out, &expr.Ct{Register: 1, Key: key},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(bit), Xor: native32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)})
	return nil
}

// loadField loads one key field into reg.
func (c *compiler) loadField(f string, reg uint32) (expr.Any, uint32, error) {
	saddr, daddr := uint32(12), uint32(16)
	if c.v6 {
		saddr, daddr = 8, 24
	}
	switch f {
	case "saddr":
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: c.addrLen}, c.addrLen, nil
	case "daddr":
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: c.addrLen}, c.addrLen, nil
	case "l4proto":
		return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg}, 1, nil
	case "dport":
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, 2, nil
	}
	return nil, 0, fmt.Errorf("unknown field %q", f)
}

// keyFields parses "ip daddr . meta l4proto . th dport" and friends.
func (c *compiler) keyFields(s *ruleState) ([]string, error) {
	var fs []string
	for {
		switch t := s.next(); t {
		case c.ipX():
			f := s.next()
			if f != "saddr" && f != "daddr" {
				return nil, fmt.Errorf("unknown %s field %q", t, f)
			}
			fs = append(fs, f)
		case "meta":
			if err := s.expect("l4proto"); err != nil {
				return nil, err
			}
			fs = append(fs, "l4proto")
		case "th":
			if err := s.expect("dport"); err != nil {
				return nil, err
			}
			fs = append(fs, "dport")
		default:
			return nil, fmt.Errorf("unexpected %q in a key", t)
		}
		if s.peek(0) != "." {
			return fs, nil
		}
		s.next()
	}
}

// loadKey loads the concatenation of fs as nft does: the first field in
// reg 1, the next ones in the 32-bit registers that follow its bytes.
func (c *compiler) loadKey(s *ruleState, fs []string) error {
	off := uint32(0)
	for i, f := range fs {
		reg := uint32(1)
		if i > 0 {
			reg = 8 + off/4
		}
		e, n, err := c.loadField(f, reg)
		if err != nil {
			return err
		}
		s.out = append(s.out, e)
		off += (n + 3) / 4 * 4
	}
	return nil
}

// addrOrConcat compiles a key followed by "@set", "vmap @map", or (for a
// single address field) a comparison with addresses and prefixes.
func (c *compiler) addrOrConcat(s *ruleState) error {
	fs, err := c.keyFields(s)
	if err != nil {
		return err
	}
	switch t := s.peek(0); {
	case t == "vmap":
		s.next()
		name := strings.TrimPrefix(s.next(), "@")
		if err := c.loadKey(s, fs); err != nil {
			return err
		}
		s.out = append(s.out, &expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: name})
		return nil
	case strings.HasPrefix(t, "@"):
		s.next()
		if err := c.loadKey(s, fs); err != nil {
			return err
		}
		s.out = append(s.out, &expr.Lookup{SourceRegister: 1, SetName: t[1:]})
		return nil
	}
	if len(fs) != 1 || (fs[0] != "saddr" && fs[0] != "daddr") {
		return fmt.Errorf("cannot compare %v", fs)
	}
	return c.addrMatch(s, fs[0])
}

// addrMatch compiles "[!=] PREFIX" or "[!=] { P1, P2 }". As nft, one
// prefix is a masked comparison, several are an anonymous interval set.
func (c *compiler) addrMatch(s *ruleState, f string) error {
	neg := false
	if s.peek(0) == "!=" {
		s.next()
		neg = true
	}
	var ps []netip.Prefix
	if s.peek(0) == "{" {
		s.next()
		for t := s.next(); t != "}"; t = s.next() {
			if t == "," {
				continue
			}
			if t == "" {
				return fmt.Errorf("unterminated set")
			}
			p, err := parsePrefix(t)
			if err != nil {
				return err
			}
			ps = append(ps, p)
		}
	} else {
		p, err := parsePrefix(s.next())
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	load, _, err := c.loadField(f, 1)
	if err != nil {
		return err
	}
	if len(ps) == 1 {
		return c.prefixCmp(s, load.(*expr.Payload), ps[0], neg)
	}
	set, err := c.anon(&gnft.Set{Table: c.table, Anonymous: true, Constant: true, Interval: true, KeyType: c.addrType()}, prefixElements(ps))
	if err != nil {
		return err
	}
	s.out = append(s.out, load, &expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: neg})
	return nil
}

func (c *compiler) addrType() gnft.SetDatatype {
	if c.v6 {
		return gnft.TypeIP6Addr
	}
	return gnft.TypeIPAddr
}

func parsePrefix(t string) (netip.Prefix, error) {
	if strings.Contains(t, "/") {
		p, err := netip.ParsePrefix(t)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(t)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// prefixCmp loads only the bytes the prefix covers, masks a partial last
// byte, and compares.
func (c *compiler) prefixCmp(s *ruleState, load *expr.Payload, p netip.Prefix, neg bool) error {
	n := uint32(p.Bits()+7) / 8
	if n == 0 {
		return fmt.Errorf("zero-length prefix %s", p)
	}
	load.Len = n
	addr := p.Addr().AsSlice()[:n]
	s.out = append(s.out, load)
	if p.Bits()%8 != 0 {
		mask := make([]byte, n)
		for i := range mask {
			bits := p.Bits() - i*8
			switch {
			case bits >= 8:
				mask[i] = 0xff
			case bits > 0:
				mask[i] = byte(0xff << (8 - bits))
			}
		}
		s.out = append(s.out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)})
	}
	op := expr.CmpOpEq
	if neg {
		op = expr.CmpOpNeq
	}
	s.out = append(s.out, &expr.Cmp{Op: op, Register: 1, Data: addr})
	return nil
}

// prefixElements turns prefixes into interval elements as nft does: each
// merged range [a, b] is a start element a and an end element b+1, and a
// leading end element at the zero address when the first range does not
// start there.
func prefixElements(ps []netip.Prefix) []gnft.SetElement {
	type rng struct{ a, b netip.Addr }
	var rs []rng
	for _, p := range ps {
		rs = append(rs, rng{p.Masked().Addr(), lastAddr(p)})
	}
	slices.SortFunc(rs, func(x, y rng) int { return x.a.Compare(y.a) })
	var merged []rng
	for _, r := range rs {
		if n := len(merged); n > 0 && (r.a.Compare(merged[n-1].b) <= 0 || r.a == merged[n-1].b.Next()) {
			if r.b.Compare(merged[n-1].b) > 0 {
				merged[n-1].b = r.b
			}
			continue
		}
		merged = append(merged, r)
	}
	var out []gnft.SetElement
	if zero := netip.IPv4Unspecified(); merged[0].a.Is6() {
		if z6 := netip.IPv6Unspecified(); merged[0].a != z6 {
			out = append(out, gnft.SetElement{Key: z6.AsSlice(), IntervalEnd: true})
		}
	} else if merged[0].a != zero {
		out = append(out, gnft.SetElement{Key: zero.AsSlice(), IntervalEnd: true})
	}
	for _, r := range merged {
		out = append(out, gnft.SetElement{Key: r.a.AsSlice()})
		if end := r.b.Next(); end.IsValid() {
			out = append(out, gnft.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// l4protoMatch compiles "meta l4proto tcp".
func (c *compiler) l4protoMatch(s *ruleState) error {
	if err := s.expect("meta", "l4proto"); err != nil {
		return err
	}
	p, err := protoNumber(s.next())
	if err != nil {
		return err
	}
	s.out = append(s.out, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}})
	return nil
}

func protoNumber(name string) (byte, error) {
	switch name {
	case "tcp":
		return unix.IPPROTO_TCP, nil
	case "udp":
		return unix.IPPROTO_UDP, nil
	case "sctp":
		return unix.IPPROTO_SCTP, nil
	}
	return 0, fmt.Errorf("unknown protocol %q", name)
}

// fib compiles "fib saddr|daddr type local".
func (c *compiler) fib(s *ruleState) error {
	s.next()
	f := &expr.Fib{Register: 1, ResultADDRTYPE: true}
	switch w := s.next(); w {
	case "saddr":
		f.FlagSADDR = true
	case "daddr":
		f.FlagDADDR = true
	default:
		return fmt.Errorf("unsupported fib %q", w)
	}
	if err := s.expect("type", "local"); err != nil {
		return err
	}
	s.out = append(s.out, f, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native32(unix.RTN_LOCAL)})
	return nil
}

// mark compiles "mark and X != 0" and "mark set mark or|xor X".
func (c *compiler) mark(s *ruleState) error {
	s.next()
	load := &expr.Meta{Key: expr.MetaKeyMARK, Register: 1}
	if s.peek(0) == "and" {
		s.next()
		x, err := parseUint32(s.next())
		if err != nil {
			return err
		}
		if err := s.expect("!=", "0"); err != nil {
			return err
		}
		s.out = append(s.out, load, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(x), Xor: native32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)})
		return nil
	}
	if err := s.expect("set", "mark"); err != nil {
		return err
	}
	op := s.next()
	x, err := parseUint32(s.next())
	if err != nil {
		return err
	}
	var mask uint32
	switch op {
	case "or":
		mask = ^x
	case "xor":
		mask = 0xffffffff
	default:
		return fmt.Errorf("unsupported mark operation %q", op)
	}
	s.out = append(s.out, load, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(mask), Xor: native32(x)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	return nil
}

func parseUint32(t string) (uint32, error) {
	v, err := strconv.ParseUint(t, 0, 32)
	return uint32(v), err
}

func (c *compiler) natFamily() uint32 {
	if c.v6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

// dnat compiles "dnat to ADDR:PORT" and "dnat ip addr . port to GEN map
// { K : ADDR . PORT , ... }".
func (c *compiler) dnat(s *ruleState) error {
	s.next()
	if s.peek(0) == "to" {
		s.next()
		ap, err := netip.ParseAddrPort(s.next())
		if err != nil {
			return err
		}
		s.out = append(s.out, &expr.Immediate{Register: 1, Data: ap.Addr().AsSlice()},
			&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, ap.Port())},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: c.natFamily(), RegAddrMin: 1, RegProtoMin: 2, Specified: true})
		return nil
	}
	if err := s.expect(c.ipX(), "addr", ".", "port", "to"); err != nil {
		return err
	}
	if slices.ContainsFunc(s.toks[s.i:], func(t string) bool { return strings.HasPrefix(t, "@") }) {
		return c.dnatNamedMap(s)
	}
	dataType, err := gnft.ConcatSetType(c.addrType(), gnft.TypeInetService)
	if err != nil {
		return err
	}
	if err := c.genMap(s, "map", dataType, func(t []string) ([]byte, *expr.Verdict, error) {
		if len(t) != 3 || t[1] != "." {
			return nil, nil, fmt.Errorf("bad dnat target %q", strings.Join(t, " "))
		}
		a, err := netip.ParseAddr(t[0])
		if err != nil {
			return nil, nil, err
		}
		port, err := strconv.ParseUint(t[2], 10, 16)
		if err != nil {
			return nil, nil, err
		}
		return append(a.AsSlice(), byte(port>>8), byte(port), 0, 0), nil, nil
	}, 1); err != nil {
		return err
	}
	s.out = append(s.out, &expr.NAT{Type: expr.NATTypeDestNAT, Family: c.natFamily(), RegAddrMin: 1, RegProtoMin: 8 + c.addrLen/4})
	return nil
}

// dnatNamedMap compiles the rest of "dnat ip addr . port to KEY map
// @NAME" as nft does. KEY is a generator (--nftables-endpoint-choice=shared:
// its value, in host byte order as nft keys a map declared with typeof
// numgen, in reg 1), "ip daddr . P dport . numgen random mod N" (a direct
// ClusterIP choice, planner.direct: the address in reg 1, the port and the
// generator's value in the 32-bit registers after it) or "P dport . numgen
// random mod N" (a direct NodePort choice: the port in reg 1, the
// generator's value in the next 32-bit register). The lookup's value,
// address and port, comes back into reg 1 for the DNAT.
func (c *compiler) dnatNamedMap(s *ruleState) error {
	portReg := 8 + c.addrLen/4
	var key []expr.Any
	genReg := portReg + 1
	if p := s.peek(0); (p == "tcp" || p == "udp" || p == "sctp") && s.peek(1) == "dport" {
		s.next()
		if err := s.expect("dport", "."); err != nil {
			return err
		}
		port, _, err := c.loadField("dport", 1)
		if err != nil {
			return err
		}
		key, genReg = []expr.Any{port}, 9
	} else if s.peek(0) == c.ipX() {
		if err := s.expect(c.ipX(), "daddr", "."); err != nil {
			return err
		}
		if p := s.next(); p != "tcp" && p != "udp" && p != "sctp" {
			return fmt.Errorf("unexpected %q in a key", p)
		}
		if err := s.expect("dport", "."); err != nil {
			return err
		}
		addr, _, err := c.loadField("daddr", 1)
		if err != nil {
			return err
		}
		port, _, err := c.loadField("dport", portReg)
		if err != nil {
			return err
		}
		key = []expr.Any{addr, port}
	}
	gen, err := c.generator(s)
	if err != nil {
		return err
	}
	if key != nil {
		ng, ok := gen[0].(*expr.Numgen)
		if len(gen) != 1 || !ok {
			return fmt.Errorf("only numgen after the port in a key")
		}
		ng.Register = genReg
	}
	if err := s.expect("map"); err != nil {
		return err
	}
	name, ok := strings.CutPrefix(s.next(), "@")
	if !ok || name == "" {
		return fmt.Errorf("expected a map name")
	}
	s.out = append(append(append(s.out, key...), gen...),
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: name},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: c.natFamily(), RegAddrMin: 1, RegProtoMin: portReg})
	return nil
}

// genVmapOrMatch compiles "GEN vmap { ... }" or a match on the
// generator's value (--nftables-endpoint-choice=rules): "GEN < N", "GEN
// LO-HI" or "GEN N". As nft does, a comparison by order converts the value
// to network byte order first; equality compares it as it is.
func (c *compiler) genVmapOrMatch(s *ruleState) error {
	start, outs := s.i, len(s.out)
	gen, err := c.generator(s)
	if err != nil {
		return err
	}
	if s.peek(0) == "vmap" {
		s.i, s.out = start, s.out[:outs]
		return c.genVmap(s)
	}
	s.out = append(s.out, gen...)
	hton := &expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4}
	be := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	if s.peek(0) == "<" {
		s.next()
		v, err := parseUint32(s.next())
		if err != nil {
			return err
		}
		s.out = append(s.out, hton, &expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: be(v)})
		return nil
	}
	lo, hi, isRange, err := parseRange(s.next())
	if err != nil {
		return err
	}
	if !isRange {
		s.out = append(s.out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native32(lo)})
		return nil
	}
	s.out = append(s.out, hton, &expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: be(lo)}, &expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: be(hi)})
	return nil
}

// genVmap compiles "GEN vmap { K : goto CHAIN , ... }".
func (c *compiler) genVmap(s *ruleState) error {
	return c.genMap(s, "vmap", gnft.TypeVerdict, func(t []string) ([]byte, *expr.Verdict, error) {
		v, err := c.verdict(&ruleState{toks: t})
		return nil, v, err
	}, 0)
}

// genMap compiles a generator (numgen random|inc mod N, jhash ip
// saddr|daddr mod N seed S) and an anonymous map keyed by its value (single
// values or ranges "A-B"), looked up into dreg. With ranges the map is an
// interval map. The generator's value is turned into network byte order
// first (nft does so for interval maps; see below for plain ones).
func (c *compiler) genMap(s *ruleState, kw string, dataType gnft.SetDatatype,
	value func([]string) ([]byte, *expr.Verdict, error), dreg uint32) error {
	gen, err := c.generator(s)
	if err != nil {
		return err
	}
	if err := s.expect(kw, "{"); err != nil {
		return err
	}
	type entry struct {
		lo, hi uint32
		val    []byte
		v      *expr.Verdict
	}
	var es []entry
	interval := false
	for s.peek(0) != "}" {
		if s.peek(0) == "" {
			return fmt.Errorf("unterminated map")
		}
		k := s.next()
		if err := s.expect(":"); err != nil {
			return err
		}
		var vt []string
		for t := s.peek(0); t != "," && t != "}" && t != ""; t = s.peek(0) {
			vt = append(vt, s.next())
		}
		if s.peek(0) == "," {
			s.next()
		}
		lo, hi, isRange, err := parseRange(k)
		if err != nil {
			return err
		}
		interval = interval || isRange
		val, v, err := value(vt)
		if err != nil {
			return err
		}
		es = append(es, entry{lo, hi, val, v})
	}
	s.next()
	var elems []gnft.SetElement
	// nft keeps the generator's host byte order for a plain map, but
	// google/nftables marks every anonymous set's keys big-endian (in its
	// user data, which nft reads to print them); the keys are therefore
	// big-endian, and the value converted, as nft does for interval maps.
	key := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	for i, e := range es {
		elems = append(elems, gnft.SetElement{Key: key(e.lo), Val: e.val, VerdictData: e.v})
		if interval && (i+1 == len(es) || es[i+1].lo != e.hi+1) {
			elems = append(elems, gnft.SetElement{Key: key(e.hi + 1), IntervalEnd: true})
		}
	}
	set, err := c.anon(&gnft.Set{Table: c.table, Anonymous: true, Constant: true, IsMap: true, Interval: interval,
		KeyType: gnft.TypeInteger, DataType: dataType, KeyByteOrder: binaryutil.BigEndian}, elems)
	if err != nil {
		return err
	}
	s.out = append(s.out, gen...)
	s.out = append(s.out, &expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4})
	s.out = append(s.out, &expr.Lookup{SourceRegister: 1, DestRegister: dreg, IsDestRegSet: true, SetName: set.Name, SetID: set.ID})
	return nil
}

func parseRange(k string) (lo, hi uint32, isRange bool, err error) {
	a, b, isRange := strings.Cut(k, "-")
	lo, err = parseUint32(a)
	if err != nil || !isRange {
		return lo, lo, false, err
	}
	hi, err = parseUint32(b)
	return lo, hi, true, err
}

// generator compiles "numgen random|inc mod N" or "jhash ip saddr|daddr
// mod N seed S" into reg 1.
func (c *compiler) generator(s *ruleState) ([]expr.Any, error) {
	switch t := s.next(); t {
	case "numgen":
		typ := uint32(unix.NFT_NG_RANDOM)
		switch w := s.next(); w {
		case "random":
		case "inc":
			typ = unix.NFT_NG_INCREMENTAL
		default:
			return nil, fmt.Errorf("unknown numgen %q", w)
		}
		if err := s.expect("mod"); err != nil {
			return nil, err
		}
		n, err := parseUint32(s.next())
		if err != nil {
			return nil, err
		}
		var off uint32
		if s.peek(0) == "offset" {
			s.next()
			if off, err = parseUint32(s.next()); err != nil {
				return nil, err
			}
		}
		return []expr.Any{&expr.Numgen{Register: 1, Modulus: n, Type: typ, Offset: off}}, nil
	case "jhash":
		fs, err := c.keyFields(s)
		if err != nil || len(fs) != 1 {
			return nil, fmt.Errorf("bad jhash key %v: %v", fs, err)
		}
		load, n, err := c.loadField(fs[0], 2)
		if err != nil {
			return nil, err
		}
		if err := s.expect("mod"); err != nil {
			return nil, err
		}
		mod, err := parseUint32(s.next())
		if err != nil {
			return nil, err
		}
		if err := s.expect("seed"); err != nil {
			return nil, err
		}
		seed, err := parseUint32(s.next())
		if err != nil {
			return nil, err
		}
		return []expr.Any{load, &expr.Hash{SourceRegister: 2, DestRegister: 1, Length: n, Modulus: mod, Seed: seed, Type: expr.HashTypeJenkins}}, nil
	default:
		return nil, fmt.Errorf("unknown generator %q", t)
	}
}

// update compiles "update @SET { ip saddr }".
func (c *compiler) update(s *ruleState) error {
	s.next()
	name := strings.TrimPrefix(s.next(), "@")
	if err := s.expect("{"); err != nil {
		return err
	}
	fs, err := c.keyFields(s)
	if err != nil {
		return err
	}
	if err := s.expect("}"); err != nil {
		return err
	}
	if err := c.loadKey(s, fs); err != nil {
		return err
	}
	s.out = append(s.out, &expr.Dynset{SrcRegKey: 1, SetName: name, Operation: unix.NFT_DYNSET_OP_UPDATE})
	return nil
}
