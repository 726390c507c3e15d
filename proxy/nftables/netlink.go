package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	mnl "github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// netlinkApplier programs a plan through netlink batches: one batch per
// transaction, which the kernel applies atomically, with no nft process and
// no text parsing in the kernel's path. Rules are compiled from the plan's
// text (compile.go); github.com/google/nftables encodes the messages, and
// svcnet sends them on a socket of its own (send), asking the kernel for
// one acknowledgement per batch instead of an ack and a rule echo per
// message. knftables v0.0.22's netlink support only lists objects, so it
// is not used for writing.
type netlinkApplier struct {
	v6     bool
	family gnft.TableFamily
	// netns is the path of the network namespace to program ("" for
	// this process's own).
	netns string

	// afterPart, when set (tests), runs after each transaction of
	// applyParts has been committed.
	afterPart func()

	mu sync.Mutex
	// sets remembers the key and value types of the table's named sets
	// and maps, learnt from the plan's "add set/map" ops (a full sync, the
	// first of every process, adds them all).
	sets map[tobj]*gnft.Set
	// session and anonSeq name anonymous sets uniquely (see addAnon);
	// session is random so that a restarted proxy does not collide with
	// the sets of its predecessor.
	session string
	anonSeq uint32
	// enc builds the messages of a transaction (google/nftables' encoders)
	// and hands the batch to capture instead of a socket; svcnet sends it
	// itself (see send).
	enc      *gnft.Conn
	captured []mnl.Message
	// sock is the socket every transaction is sent on; nil until the first
	// one, and after an error (its unread answers must not be taken for a
	// later batch's). sndBuf is its send buffer size.
	sock   *mnl.Conn
	sndBuf int
	// seq numbers the messages sent on sock; out is the datagram buffer,
	// kept between the transactions of a sync (see send).
	seq uint32
	out []byte
}

// keptSendBuf is the largest datagram buffer kept after a transaction; a
// full sync's larger ones are dropped when it ends.
const keptSendBuf = 1 << 20

// minSendBuf is the smallest send buffer of the batch socket; a larger
// batch grows it (the kernel refuses a datagram larger than the buffer).
const minSendBuf = 1 << 20

// answerTimeout bounds the wait for a batch's answers.
const answerTimeout = time.Minute

func newNetlinkApplier(v6 bool, netnsName string) *netlinkApplier {
	a := &netlinkApplier{v6: v6, family: gnft.TableFamilyIPv4, sets: map[tobj]*gnft.Set{},
		session: strconv.FormatUint(uint64(rand.Uint32()), 36) + "_"}
	if v6 {
		a.family = gnft.TableFamilyIPv6
	}
	if netnsName != "" {
		a.netns = netnsName
		if !strings.Contains(netnsName, "/") {
			a.netns = filepath.Join("/var/run/netns", netnsName)
		}
	}
	return a
}

// conn opens a connection; sizeHint is the number of messages the batch
// will hold, to size the socket buffers (the kernel answers every message
// before we read, and refuses a batch larger than the send buffer).
func (a *netlinkApplier) conn(bufBytes *int, extra ...gnft.ConnOption) (*gnft.Conn, func(), error) {
	opts := append(extra, gnft.WithSockOptions(func(c *mnl.Conn) error {
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			n := max(*bufBytes, 1<<20)
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n); e != nil {
				serr = e
			}
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n); e != nil {
				serr = e
			}
		}); err != nil {
			return err
		}
		return serr
	}))
	closeNS := func() {}
	if a.netns != "" {
		f, err := os.Open(a.netns)
		if err != nil {
			return nil, nil, fmt.Errorf("open network namespace: %w", err)
		}
		opts = append(opts, gnft.WithNetNSFd(int(f.Fd())))
		closeNS = func() { f.Close() }
	}
	c, err := gnft.New(opts...)
	if err != nil {
		closeNS()
		return nil, nil, err
	}
	return c, closeNS, nil
}

// table returns table name ("" for TableName).
func (a *netlinkApplier) table(name string) *gnft.Table {
	if name == "" {
		name = TableName
	}
	return &gnft.Table{Name: name, Family: a.family}
}

// apply implements applier: the ops are encoded into one batch, which the
// kernel applies atomically.
func (a *netlinkApplier) apply(ctx context.Context, ops []op) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.releaseSendBuf()
	msgs, err := a.encode(ops)
	if err != nil {
		return err
	}
	return a.send(msgs)
}

// applyParts implements partsApplier: each part is a transaction of its
// own, and the next part is encoded while the kernel commits the current
// one (two cores: the encoding and the kernel's work overlap).
func (a *netlinkApplier) applyParts(ctx context.Context, parts [][]op) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.releaseSendBuf()
	type encoded struct {
		msgs []mnl.Message
		err  error
	}
	next := make(chan encoded, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(next)
		for _, part := range parts {
			msgs, err := a.encode(part)
			select {
			case next <- encoded{msgs, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	})
	// The encoder uses the applier's encoding state: it must have ended
	// before the lock is released.
	defer wg.Wait()
	defer close(stop)
	for e := range next {
		if e.err != nil {
			return e.err
		}
		if err := a.send(e.msgs); err != nil {
			return err
		}
		if a.afterPart != nil {
			a.afterPart()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// encode turns ops into the messages of one batch (begin, messages, end).
// It uses enc, captured, sets and anonSeq, and send only sock: one
// goroutine may encode while another sends.
func (a *netlinkApplier) encode(ops []op) ([]mnl.Message, error) {
	if a.enc == nil {
		enc, err := gnft.New(gnft.WithTestDial(a.capture), gnft.AsLasting()) // one test socket, not one (and a random source) per flush
		if err != nil {
			return nil, err
		}
		a.enc = enc
	}
	b := &batch{a: a, c: a.enc, tables: map[string]*gnft.Table{}, comps: map[string]*compiler{}}
	a.captured = append(a.captured[:0], batchMsg(unix.NFNL_MSG_BATCH_BEGIN))
	for i := 0; i < len(ops); i++ {
		// Consecutive element ops on one set go in one message.
		j := i
		if _, ok := ops[i].obj.(*knftables.Element); ok {
			for j+1 < len(ops) && sameElementRun(ops[i], ops[j+1]) {
				j++
			}
		}
		if err := b.op(ops[i : j+1]); err != nil {
			_ = a.enc.Flush() // drop what was encoded
			a.captured = nil
			return nil, err
		}
		i = j
	}
	if err := a.enc.Flush(); err != nil {
		a.captured = nil
		return nil, fmt.Errorf("encode netlink batch: %w", err)
	}
	msgs := append(a.captured, batchMsg(unix.NFNL_MSG_BATCH_END))
	a.captured = nil
	elementsByID(msgs)
	return msgs, nil
}

// batchMsg is a batch's begin or end message.
func batchMsg(typ int) mnl.Message {
	return mnl.Message{Header: mnl.Header{Type: mnl.HeaderType(typ), Flags: mnl.Request},
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES}}
}

// nftMsg is the netlink message type of a nf_tables message.
func nftMsg(t int) mnl.HeaderType { return mnl.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | t) }

// elementsByID makes the element messages of anonymous sets (always
// created in the same batch; a named set that exists is not created again,
// so its ID means nothing to the kernel) name their set by its transaction
// ID only. The kernel finds a set
// by name with a walk of the table's list of sets, newest last, so giving
// the name (as google/nftables does, with the ID) costs a walk of every
// set per message, O(N²) over a full sync of N Services' maps; without a
// name it takes the ID, which it looks up among the transaction's new
// sets from the newest, where it is. A rule's lookup of a set needs the
// name (the kernel requires it), so that walk stays.
func elementsByID(msgs []mnl.Message) {
	created := map[uint32]bool{}
	for i := range msgs {
		switch msgs[i].Header.Type {
		case nftMsg(unix.NFT_MSG_NEWSET):
			flags, _ := attrU32(msgs[i].Data, unix.NFTA_SET_FLAGS)
			if id, ok := attrU32(msgs[i].Data, unix.NFTA_SET_ID); ok && flags&unix.NFT_SET_ANONYMOUS != 0 {
				created[id] = true
			}
		case nftMsg(unix.NFT_MSG_NEWSETELEM):
			if id, ok := attrU32(msgs[i].Data, unix.NFTA_SET_ELEM_LIST_SET_ID); ok && created[id] {
				msgs[i].Data = dropAttr(msgs[i].Data, unix.NFTA_SET_ELEM_LIST_SET)
			}
		}
	}
}

// attrs walks the attributes of a nf_tables message (after its 4-byte
// nfgenmsg header): f gets each attribute's type, its bytes (header
// included) and its payload.
func attrs(data []byte, f func(typ uint16, whole, payload []byte)) {
	for b := data[min(4, len(data)):]; len(b) >= 4; {
		n := int(binary.NativeEndian.Uint16(b))
		if n < 4 || n > len(b) {
			return
		}
		f(binary.NativeEndian.Uint16(b[2:])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER), b[:n], b[4:n])
		n = (n + 3) &^ 3
		if n > len(b) {
			return
		}
		b = b[n:]
	}
}

func attrU32(data []byte, typ uint16) (uint32, bool) {
	var v uint32
	found := false
	attrs(data, func(t uint16, _, p []byte) {
		if t == typ && len(p) == 4 {
			v, found = binary.BigEndian.Uint32(p), true
		}
	})
	return v, found
}

func dropAttr(data []byte, typ uint16) []byte {
	out := append([]byte(nil), data[:min(4, len(data))]...)
	attrs(data, func(t uint16, whole, _ []byte) {
		if t != typ {
			out = append(out, whole...)
			for len(out)%4 != 0 {
				out = append(out, 0)
			}
		}
	})
	return out
}

// capture is the encoder's socket: it keeps the batch google/nftables
// would send and answers every read with an acknowledgement.
func (a *netlinkApplier) capture(req []mnl.Message) ([]mnl.Message, error) {
	if req != nil {
		// google/nftables wraps every flush in a batch of its own; encode
		// makes one batch of all the flushes.
		if n := len(req); n >= 2 && req[0].Header.Type == unix.NFNL_MSG_BATCH_BEGIN && req[n-1].Header.Type == unix.NFNL_MSG_BATCH_END {
			req = req[1 : n-1]
		}
		a.captured = append(a.captured, req...)
		return nil, nil
	}
	return ackAnswer, nil
}

// ackAnswer is capture's answer to every read: an acknowledgement
// (google/nftables reads its error code only).
var ackAnswer = []mnl.Message{{Header: mnl.Header{Type: mnl.Error}, Data: make([]byte, 4+unix.SizeofNlMsghdr)}}

// send sends one batch (begin, messages, end) in one datagram and waits
// for the kernel's answer. google/nftables asks an acknowledgement of
// every message and an echo of every rule; the kernel then writes (and
// svcnet would read and parse) a copy of each rule and an ack per message,
// which cost about a third of a full sync. Here only the last message asks
// for an ack: the kernel reports an error of any message without being
// asked, processes the whole batch before answering and answers in order,
// so the last message's ack ends the batch's answers.
func (a *netlinkApplier) send(msgs []mnl.Message) error {
	if len(msgs) <= 2 {
		return nil // begin and end only
	}
	size := 0
	for i := range msgs {
		size += nlmsgAlign(unix.NLMSG_HDRLEN + len(msgs[i].Data))
	}
	c, err := a.socket(size)
	if err != nil {
		return err
	}
	// The datagram is written here, into one buffer sized up front and
	// kept for the next transaction: netlink's SendMessages marshals every
	// message on its own and appends it to a growing buffer, a quarter of
	// a full sync's allocations.
	if cap(a.out) < size {
		a.out = make([]byte, 0, size)
	}
	buf := a.out[:size]
	first := a.seq + 1
	off := 0
	for i := range msgs {
		h := msgs[i].Header
		flags := uint16(h.Flags)
		if i > 0 && i < len(msgs)-1 {
			flags &^= uint16(mnl.Acknowledge) | unix.NLM_F_ECHO
		}
		if i == len(msgs)-2 {
			flags |= uint16(mnl.Acknowledge)
		}
		a.seq++
		n := unix.NLMSG_HDRLEN + len(msgs[i].Data)
		binary.NativeEndian.PutUint32(buf[off:], uint32(n))
		binary.NativeEndian.PutUint16(buf[off+4:], uint16(h.Type))
		binary.NativeEndian.PutUint16(buf[off+6:], flags)
		binary.NativeEndian.PutUint32(buf[off+8:], a.seq)
		binary.NativeEndian.PutUint32(buf[off+12:], 0) // the kernel's port ID is the socket's
		copy(buf[off+unix.NLMSG_HDRLEN:], msgs[i].Data)
		end := off + nlmsgAlign(n)
		clear(buf[off+n : end])
		off = end
	}
	last := a.seq - 1 // the message before the batch end asks the ack
	if err := sendDatagram(c, buf); err != nil {
		a.dropSocket()
		return fmt.Errorf("netlink batch of %d messages: %w", len(msgs)-2, err)
	}
	if err := a.readAnswers(c, first, last); err != nil {
		a.dropSocket()
		return fmt.Errorf("netlink batch of %d messages: %w", len(msgs)-2, err)
	}
	return nil
}

func nlmsgAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// sendDatagram sends buf to the kernel on c in one sendto.
func sendDatagram(c *mnl.Conn, buf []byte) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	}); err != nil {
		return err
	}
	return os.NewSyscallError("sendto", serr)
}

// releaseSendBuf drops a datagram buffer too large to keep between syncs.
func (a *netlinkApplier) releaseSendBuf() {
	if cap(a.out) > keptSendBuf {
		a.out = nil
	}
}

// readAnswers reads the batch's answers up to the ack of message last;
// an error answer (of message seq-first of the batch; 0 is the batch
// itself, a refused commit) makes the batch's error.
func (a *netlinkApplier) readAnswers(c *mnl.Conn, first, last uint32) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	// The kernel has answered when sendmsg returns (it processes the batch
	// in the call); the deadline only guards against an answer that never
	// comes.
	if err := c.SetReadDeadline(time.Now().Add(answerTimeout)); err != nil {
		return err
	}
	var errs []error
	buf := make([]byte, 64<<10)
	for {
		var n int
		var rerr error
		if err := raw.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN
		}); err != nil {
			return err
		}
		if rerr != nil {
			return errors.Join(append(errs, os.NewSyscallError("recvfrom", rerr))...)
		}
		answers, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range answers {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				errs = append(errs, answerError(m, first, -code))
			}
			if m.Header.Seq == last {
				return errors.Join(errs...)
			}
		}
	}
}

// answerError describes an error answer: which message of the batch, the
// errno (wrapped, for errors.Is) and the kernel's extended ack text.
func answerError(m syscall.NetlinkMessage, first uint32, errno int32) error {
	what := "the batch"
	if m.Header.Seq != first {
		what = fmt.Sprintf("message %d", m.Header.Seq-first)
	}
	e := syscall.Errno(errno)
	// errno, the request's header (the socket caps the payload), then
	// NLMSGERR_ATTR_* attributes when the kernel has more to say.
	if m.Header.Flags&unix.NLM_F_ACK_TLVS != 0 && len(m.Data) > 4+unix.SizeofNlMsghdr {
		ad, err := mnl.NewAttributeDecoder(m.Data[4+unix.SizeofNlMsghdr:])
		if err == nil {
			for ad.Next() {
				if ad.Type() == unix.NLMSGERR_ATTR_MSG {
					return fmt.Errorf("%s: %w (%s)", what, e, ad.String())
				}
			}
		}
	}
	return fmt.Errorf("%s: %w", what, e)
}

// socket returns the batch socket, opening it (in the network namespace,
// whose file is closed once the socket exists) if needed, with a send
// buffer of at least size bytes. One socket serves every transaction:
// closing a nftables netlink socket waits for the kernel's cleanup of
// earlier transactions (an RCU grace period), which cost 8-10 ms per sync
// when every transaction had a socket of its own.
func (a *netlinkApplier) socket(size int) (*mnl.Conn, error) {
	if a.sock == nil {
		cfg := &mnl.Config{}
		if a.netns != "" {
			f, err := os.Open(a.netns)
			if err != nil {
				return nil, fmt.Errorf("open network namespace: %w", err)
			}
			defer f.Close()
			cfg.NetNS = int(f.Fd())
		}
		c, err := mnl.Dial(unix.NETLINK_NETFILTER, cfg)
		if err != nil {
			return nil, fmt.Errorf("netlink socket: %w", err)
		}
		// Error answers carry the request's header, not the whole
		// request (a rule can be kilobytes).
		if err := c.SetOption(mnl.CapAcknowledge, true); err != nil {
			c.Close()
			return nil, err
		}
		a.sock, a.sndBuf = c, 0
	}
	if want := max(size+size/8, minSendBuf); want > a.sndBuf {
		raw, err := a.sock.SyscallConn()
		if err != nil {
			return nil, err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, want)
		}); err != nil {
			return nil, err
		}
		if serr != nil {
			return nil, fmt.Errorf("netlink send buffer of %d bytes: %w", want, serr)
		}
		a.sndBuf = want
	}
	return a.sock, nil
}

// dropSocket closes the batch socket.
func (a *netlinkApplier) dropSocket() {
	if a.sock != nil {
		_ = a.sock.Close()
		a.sock = nil
	}
}

// isNotFound reports a missing object, from nft (knftables) or netlink.
func isNotFound(err error) bool {
	// google/nftables flattens some errors into text.
	return knftables.IsNotFound(err) || errors.Is(err, syscall.ENOENT) || (err != nil && strings.Contains(err.Error(), "no such file or directory"))
}

func sameElementRun(a, b op) bool {
	ea, ok1 := a.obj.(*knftables.Element)
	eb, ok2 := b.obj.(*knftables.Element)
	return ok1 && ok2 && a.verb == b.verb && ea.Set == eb.Set && ea.Map == eb.Map && ea.Table == eb.Table
}

// batch is one transaction being built.
type batch struct {
	a      *netlinkApplier
	c      *gnft.Conn
	tables map[string]*gnft.Table // by the plan's name ("" for TableName)
	comps  map[string]*compiler
}

// table returns the table an object names ("" for TableName).
func (b *batch) table(name string) *gnft.Table {
	name = tableRef(name)
	t := b.tables[name]
	if t == nil {
		t = b.a.table(name)
		b.tables[name] = t
	}
	return t
}

// comp returns the rule compiler of table name.
func (b *batch) comp(name string) *compiler {
	name = tableRef(name)
	c := b.comps[name]
	if c == nil {
		c = newCompiler(b.a.v6, b.table(name), b.addAnon)
		b.comps[name] = c
	}
	return c
}

// addAnon adds an anonymous set with a name of its own. nft (and
// google/nftables) name them "__map%d" and let the kernel pick the number,
// which it does by sscanf-ing the name of every set in the table: for a
// full sync of N Services that is O(N²) sscanf calls, which dominated the
// kernel's time (46 s of system time at 10k Services on this machine). A
// concrete unique name costs one strcmp per set instead. Anonymous sets
// are printed inline whatever their names.
func (b *batch) addAnon(s *gnft.Set, elems []gnft.SetElement) (*gnft.Set, error) {
	b.a.anonSeq++
	s.ID = 1<<31 | b.a.anonSeq&0x7fffffff
	prefix := "__set"
	if s.IsMap {
		prefix = "__map"
	}
	s.Name = prefix + b.a.session + strconv.FormatUint(uint64(b.a.anonSeq), 10)
	if err := b.c.AddSet(s, elems); err != nil {
		return nil, err
	}
	return s, nil
}

// op adds the messages of one op (or of a run of element ops).
func (b *batch) op(run []op) error {
	o := run[0]
	switch obj := o.obj.(type) {
	case *knftables.Table:
		return b.tableOp(o.verb, obj.Name)
	case *knftables.Chain:
		return b.chainOp(o.verb, obj)
	case *knftables.Rule:
		if o.verb != opAdd {
			return fmt.Errorf("unsupported rule operation %d", o.verb)
		}
		return b.rule(obj)
	case *knftables.Set:
		return b.setOp(o.verb, tobj{tableRef(obj.Table), obj.Name}, obj.Type, obj.Flags, obj.Timeout, obj.Comment, false)
	case *knftables.Map:
		if obj.TypeOf != "" {
			return b.typeOfMapOp(o.verb, obj)
		}
		return b.setOp(o.verb, tobj{tableRef(obj.Table), obj.Name}, obj.Type, obj.Flags, obj.Timeout, obj.Comment, true)
	case *knftables.Element:
		return b.elements(run)
	}
	return fmt.Errorf("unsupported object %T", o.obj)
}

func (b *batch) tableOp(v verb, name string) error {
	t := b.table(name)
	switch v {
	case opAdd:
		b.c.AddTable(t)
	case opDelete:
		b.c.DelTable(t)
		for id := range b.a.sets {
			if id.table == tableRef(name) {
				delete(b.a.sets, id)
			}
		}
	default:
		b.c.FlushTable(t)
	}
	return nil
}

func (b *batch) chainOp(v verb, ch *knftables.Chain) error {
	c := &gnft.Chain{Name: ch.Name, Table: b.table(ch.Table)}
	switch v {
	case opAdd:
		if ch.Hook != nil {
			if err := fillBaseChain(c, ch); err != nil {
				return err
			}
		}
		b.c.AddChain(c)
	case opFlush:
		b.c.FlushChain(c)
	case opDelete:
		b.c.DelChain(c)
	}
	return nil
}

// fillBaseChain fills in the type, hook and numeric priority.
func fillBaseChain(c *gnft.Chain, ch *knftables.Chain) error {
	hooks := map[knftables.BaseChainHook]gnft.ChainHook{
		knftables.PreroutingHook: *gnft.ChainHookPrerouting, knftables.InputHook: *gnft.ChainHookInput,
		knftables.ForwardHook: *gnft.ChainHookForward, knftables.OutputHook: *gnft.ChainHookOutput,
		knftables.PostroutingHook: *gnft.ChainHookPostrouting,
	}
	h, ok := hooks[*ch.Hook]
	if !ok {
		return fmt.Errorf("unsupported hook %q", *ch.Hook)
	}
	prio, err := strconv.Atoi(string(*ch.Priority))
	if err != nil {
		return fmt.Errorf("priority %q: %w", *ch.Priority, err)
	}
	p := gnft.ChainPriority(int32(prio))
	c.Hooknum, c.Priority, c.Type = &h, &p, gnft.ChainType(*ch.Type)
	return nil
}

func (b *batch) rule(r *knftables.Rule) error {
	table := b.table(r.Table)
	exprs, err := b.comp(r.Table).compile(r.Rule)
	if err != nil {
		return err
	}
	// The rule's message is written here, into one buffer of its size;
	// google/nftables' AddRule copies a rule's bytes five times over, the
	// largest part of a full sync's allocations. The expressions are
	// google/nftables' own encodings. Whatever the library holds goes into
	// the batch first, to keep the order.
	if err := b.c.Flush(); err != nil {
		return err
	}
	enc := make([][]byte, len(exprs))
	size := nfgenmsgLen + attrLen(len(table.Name)+1) + attrLen(len(r.Chain)+1) + unix.NLA_HDRLEN
	for i, e := range exprs {
		if enc[i], err = expr.Marshal(byte(table.Family), e); err != nil {
			return fmt.Errorf("rule %q: %w", r.Rule, err)
		}
		size += attrLen(len(enc[i]))
	}
	var comment []byte
	if r.Comment != nil {
		comment = userdata.AppendString(nil, userdata.TypeComment, *r.Comment)
		size += attrLen(len(comment))
	}
	if size > 0xffff { // an attribute's length is 16 bits
		return fmt.Errorf("rule %q: %d bytes encoded, more than a netlink attribute holds", r.Rule, size)
	}
	w := attrWriter{buf: make([]byte, 0, size)}
	w.buf = append(w.buf, byte(table.Family), unix.NFNETLINK_V0, 0, 0)
	w.str(unix.NFTA_RULE_TABLE, table.Name)
	w.str(unix.NFTA_RULE_CHAIN, r.Chain)
	nest := w.open(unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS)
	for _, e := range enc {
		w.attr(unix.NLA_F_NESTED|unix.NFTA_LIST_ELEM, e)
	}
	w.close(nest)
	if comment != nil {
		w.attr(unix.NFTA_RULE_USERDATA, comment)
	}
	b.a.captured = append(b.a.captured, mnl.Message{
		Header: mnl.Header{Type: nftMsg(unix.NFT_MSG_NEWRULE), Flags: mnl.Request | mnl.Create | unix.NLM_F_APPEND},
		Data:   w.buf,
	})
	return nil
}

// nfgenmsgLen is the size of the header of every nf_tables message.
const nfgenmsgLen = 4

// attrLen is the size of an attribute with n bytes of payload, padded.
func attrLen(n int) int { return unix.NLA_HDRLEN + (n+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1) }

// attrWriter appends netlink attributes to buf.
type attrWriter struct{ buf []byte }

func (w *attrWriter) attr(typ uint16, payload []byte) {
	w.buf = binary.NativeEndian.AppendUint16(w.buf, uint16(unix.NLA_HDRLEN+len(payload)))
	w.buf = binary.NativeEndian.AppendUint16(w.buf, typ)
	w.buf = append(w.buf, payload...)
	for len(w.buf)%unix.NLA_ALIGNTO != 0 {
		w.buf = append(w.buf, 0)
	}
}

// str appends a NUL-terminated string attribute.
func (w *attrWriter) str(typ uint16, s string) {
	w.buf = binary.NativeEndian.AppendUint16(w.buf, uint16(unix.NLA_HDRLEN+len(s)+1))
	w.buf = binary.NativeEndian.AppendUint16(w.buf, typ)
	w.buf = append(append(w.buf, s...), 0)
	for len(w.buf)%unix.NLA_ALIGNTO != 0 {
		w.buf = append(w.buf, 0)
	}
}

// open starts a nested attribute; close sets its length.
func (w *attrWriter) open(typ uint16) int {
	at := len(w.buf)
	w.buf = binary.NativeEndian.AppendUint16(w.buf, 0)
	w.buf = binary.NativeEndian.AppendUint16(w.buf, typ)
	return at
}

func (w *attrWriter) close(at int) {
	binary.NativeEndian.PutUint16(w.buf[at:], uint16(len(w.buf)-at))
}

// datatypes are the set key and value types the plan uses.
var datatypes = map[string]gnft.SetDatatype{
	"ipv4_addr": gnft.TypeIPAddr, "ipv6_addr": gnft.TypeIP6Addr,
	"inet_proto": gnft.TypeInetProto, "inet_service": gnft.TypeInetService, "verdict": gnft.TypeVerdict,
	"integer": gnft.TypeInteger,
}

func (b *batch) setOp(v verb, id tobj, typ string, flags []knftables.SetFlag, timeout *time.Duration, comment *string, isMap bool) error {
	s := b.a.sets[id]
	table := b.table(id.table)
	switch v {
	case opFlush:
		if s == nil {
			s = &gnft.Set{Name: id.name}
		}
		s.Table = table
		b.c.FlushSet(s)
		return nil
	case opDelete:
		b.c.DelSet(&gnft.Set{Name: id.name, Table: table})
		delete(b.a.sets, id)
		return nil
	}
	s, err := newSet(id.name, typ, flags, timeout, comment, isMap)
	if err != nil {
		return err
	}
	s.Table = table
	if err := b.c.AddSet(s, nil); err != nil {
		return err
	}
	b.a.sets[id] = s
	return nil
}

// typeOfMapOp adds (or flushes, or deletes) a map declared with typeof
// (the shared endpoints map): google/nftables writes no typeof, so the
// set's user data is replaced by the one nft writes for the declaration,
// which nft needs to print the map as it was declared.
func (b *batch) typeOfMapOp(v verb, m *knftables.Map) error {
	typ, err := typeOfTypes(m.TypeOf)
	if err != nil {
		return fmt.Errorf("map %s: %w", m.Name, err)
	}
	if err := b.setOp(v, tobj{tableRef(m.Table), m.Name}, typ, m.Flags, m.Timeout, m.Comment, true); err != nil || v != opAdd {
		return err
	}
	ud, err := typeOfUserData(m.TypeOf, ptrDeref(m.Comment))
	if err != nil {
		return fmt.Errorf("map %s: %w", m.Name, err)
	}
	if err := b.c.Flush(); err != nil { // the set's message is now the last captured
		return err
	}
	last := &b.a.captured[len(b.a.captured)-1]
	if last.Header.Type != nftMsg(unix.NFT_MSG_NEWSET) {
		return fmt.Errorf("map %s: no set message to complete", m.Name)
	}
	var w attrWriter
	w.buf = dropAttr(last.Data, unix.NFTA_SET_USERDATA)
	w.attr(unix.NFTA_SET_USERDATA, ud)
	last.Data = w.buf
	return nil
}

func ptrDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// typeOfUserData is the set user data nft (1.0) writes for the maps the
// plan declares with typeof: `numgen random mod 1 : ip[6] daddr . P dport`
// (the shared endpoint maps) and `ip[6] daddr . P dport . numgen random
// mod N : ip[6] daddr . P dport` (the direct ClusterIP choices), P tcp,
// udp or sctp. It holds the key's and value's byte order (host for a
// generator's value alone, none for a concatenation), their typeof
// expressions (nft's expression, protocol and field numbers; a
// concatenation lists its parts), then the comment.
func typeOfUserData(typeOf, comment string) ([]byte, error) {
	tlv := func(t byte, v []byte) []byte { return append([]byte{t, byte(len(v))}, v...) }
	u32 := func(t byte, v uint32) []byte { return tlv(t, binary.NativeEndian.AppendUint32(nil, v)) }
	const (
		udKeyByteOrder, udDataByteOrder, udKeyTypeOf, udDataTypeOf, udDataInterval, udComment = 0, 1, 3, 4, 6, 7
		exprPayload, exprConcat, exprNumgen                                                   = 7, 13, 23
		protoIP, protoIP6                                                                     = 12, 13
		fieldIPDaddr, fieldIP6Daddr, fieldDport                                               = 12, 9, 2
		byteOrderNone, byteOrderHost                                                          = 0, 1
	)
	protos := map[string]uint32{"tcp": 8, "udp": 6, "sctp": 10}
	payload := func(proto, field uint32) []byte {
		return slices.Concat(u32(0, exprPayload), tlv(1, slices.Concat(u32(0, proto), u32(1, field))))
	}
	field := func(f string) ([]byte, error) {
		w := strings.Fields(f)
		switch {
		case len(w) == 2 && w[0] == "ip" && w[1] == "daddr":
			return payload(protoIP, fieldIPDaddr), nil
		case len(w) == 2 && w[0] == "ip6" && w[1] == "daddr":
			return payload(protoIP6, fieldIP6Daddr), nil
		case len(w) == 2 && w[1] == "dport" && protos[w[0]] != 0:
			return payload(protos[w[0]], fieldDport), nil
		case len(w) == 4 && w[0] == "numgen" && w[1] == "random" && w[2] == "mod":
			n, err := parseUint32(w[3])
			return slices.Concat(u32(0, exprNumgen), tlv(1, slices.Concat(u32(0, unix.NFT_NG_RANDOM), u32(1, n), u32(2, 0)))), err
		}
		return nil, fmt.Errorf("no user data for typeof %q", f)
	}
	// part returns the typeof expression of one side and its byte order.
	part := func(side string) ([]byte, uint32, error) {
		fs := strings.Split(side, " . ")
		if len(fs) == 1 {
			e, err := field(fs[0])
			return e, byteOrderHost, err
		}
		var parts []byte
		for i, f := range fs {
			e, err := field(f)
			if err != nil {
				return nil, 0, err
			}
			parts = append(parts, tlv(byte(i), e)...)
		}
		return slices.Concat(u32(0, exprConcat), tlv(1, parts)), byteOrderNone, nil
	}
	keyS, valS, ok := strings.Cut(typeOf, " : ")
	if !ok {
		return nil, fmt.Errorf("no user data for typeof %q (not a map)", typeOf)
	}
	key, keyOrder, err := part(keyS)
	if err != nil {
		return nil, err
	}
	if keyOrder == byteOrderHost && !strings.HasPrefix(keyS, "numgen") {
		return nil, fmt.Errorf("no user data for typeof %q", typeOf)
	}
	data, dataOrder, err := part(valS)
	if err != nil {
		return nil, err
	}
	if dataOrder != byteOrderNone {
		return nil, fmt.Errorf("no user data for typeof %q", typeOf)
	}
	out := slices.Concat(u32(udKeyByteOrder, keyOrder), u32(udDataByteOrder, dataOrder), tlv(udKeyTypeOf, key), tlv(udDataTypeOf, data), u32(udDataInterval, 0))
	if comment != "" {
		out = append(out, tlv(udComment, append([]byte(comment), 0))...)
	}
	return out, nil
}

// typeOfTypes translates the typeof declarations the plan uses into nft
// types ("numgen random mod 1 : ip daddr . tcp dport" is "integer :
// ipv4_addr . inet_service").
func typeOfTypes(typeOf string) (string, error) {
	exprTypes := map[string]string{"ip daddr": "ipv4_addr", "ip6 daddr": "ipv6_addr", "tcp dport": "inet_service", "udp dport": "inet_service", "sctp dport": "inet_service"}
	var out strings.Builder
	keyS, valS, isMap := strings.Cut(typeOf, " : ")
	for i, part := range []string{keyS, valS}[:1+b2i(isMap)] {
		if i == 1 {
			out.WriteString(" : ")
		}
		for j, f := range strings.Split(part, " . ") {
			f = strings.TrimSpace(f)
			t, ok := exprTypes[f]
			if w := strings.Fields(f); len(w) == 4 && strings.Join(w[:3], " ") == "numgen random mod" {
				t, ok = "integer", true
			}
			if !ok {
				return "", fmt.Errorf("unsupported typeof %q", f)
			}
			if j > 0 {
				out.WriteString(" . ")
			}
			out.WriteString(t)
		}
	}
	return out.String(), nil
}

// parseDatatype parses an nft type, "ipv4_addr" or a concatenation
// "ipv4_addr . inet_proto . inet_service".
func parseDatatype(typ string) (t gnft.SetDatatype, concat bool, err error) {
	var ts []gnft.SetDatatype
	for _, f := range strings.Split(typ, " . ") {
		ft, ok := datatypes[strings.TrimSpace(f)]
		if !ok {
			return t, false, fmt.Errorf("unsupported type %q", f)
		}
		ts = append(ts, ft)
	}
	if len(ts) == 1 {
		return ts[0], false, nil
	}
	t, err = gnft.ConcatSetType(ts...)
	return t, true, err
}

// newSet builds a named set from its nft type ("ipv4_addr . inet_proto .
// inet_service : verdict").
func newSet(name, typ string, flags []knftables.SetFlag, timeout *time.Duration, comment *string, isMap bool) (*gnft.Set, error) {
	keyS, valS, _ := strings.Cut(typ, " : ")
	key, concat, err := parseDatatype(keyS)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", name, err)
	}
	s := &gnft.Set{Name: name, IsMap: isMap, KeyType: key, Concatenation: concat, KeyByteOrder: binaryutil.BigEndian}
	if key.Name == gnft.TypeInteger.Name {
		s.KeyByteOrder = binaryutil.NativeEndian // a generator's value, as nft keys typeof numgen
	}
	if isMap {
		if s.DataType, _, err = parseDatatype(valS); err != nil {
			return nil, fmt.Errorf("map %s: value: %w", name, err)
		}
	}
	for _, f := range flags {
		switch f {
		case knftables.DynamicFlag:
			s.Dynamic = true
		case knftables.TimeoutFlag:
			s.HasTimeout = true
		default:
			return nil, fmt.Errorf("set %s: unsupported flag %q", name, f)
		}
	}
	if timeout != nil {
		s.Timeout = *timeout
	}
	if comment != nil {
		s.Comment = *comment
	}
	return s, nil
}

// elements adds or deletes a run of elements of one set or map, in
// messages small enough for netlink's 64 KiB attribute limit.
func (b *batch) elements(run []op) error {
	first := run[0].obj.(*knftables.Element)
	name := first.Set + first.Map
	s := b.a.sets[tobj{tableRef(first.Table), name}]
	if s == nil {
		return fmt.Errorf("element of %s: the set's type is unknown (no full sync yet)", name)
	}
	s.Table = b.table(first.Table)
	types := gnft.ConcatSetTypeElements(s.KeyType)
	if !s.Concatenation {
		types = []gnft.SetDatatype{s.KeyType}
	}
	var valTypes []gnft.SetDatatype // of a map of data (not verdicts)
	if s.IsMap && s.DataType.Name != gnft.TypeVerdict.Name {
		valTypes = gnft.ConcatSetTypeElements(s.DataType)
	}
	// Encoded and sent a chunk at a time, through one buffer (a full
	// sync's runs hold up to lateRun elements; google/nftables marshals a
	// chunk into its message before returning).
	const chunk = 256
	elems := make([]gnft.SetElement, 0, min(chunk, len(run)))
	for i := 0; i < len(run); i += chunk {
		elems = elems[:0]
		for _, o := range run[i:min(i+chunk, len(run))] {
			se, err := encodeElement(o.obj.(*knftables.Element), types, s.Concatenation, valTypes)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if o.verb == opDelete {
				se.VerdictData, se.Comment = nil, ""
			}
			elems = append(elems, se)
		}
		var err error
		if run[0].verb == opDelete {
			err = b.c.SetDeleteElements(s, elems)
		} else {
			err = b.c.SetAddElements(s, elems)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// encodeElement encodes a key (each field padded to 4 bytes in a
// concatenation) and a value: a verdict, or data of valTypes.
func encodeElement(e *knftables.Element, types []gnft.SetDatatype, concat bool, valTypes []gnft.SetDatatype) (gnft.SetElement, error) {
	key, err := encodeFields(e.Key, types, concat)
	if err != nil {
		return gnft.SetElement{}, err
	}
	se := gnft.SetElement{Key: key}
	if e.Comment != nil {
		se.Comment = *e.Comment
	}
	if len(e.Value) > 0 && valTypes != nil {
		// "10.1.0.1 . 80"
		se.Val, err = encodeFields(strings.Split(strings.Join(e.Value, " . "), " . "), valTypes, len(valTypes) > 1)
		return se, err
	}
	if len(e.Value) > 0 {
		v, err := (&compiler{}).verdict(&ruleState{toks: strings.Fields(strings.Join(e.Value, " "))})
		if err != nil {
			return se, err
		}
		se.VerdictData = v
	}
	return se, nil
}

// encodeFields encodes the fields of a key or value, each padded to 4
// bytes in a concatenation.
func encodeFields(fs []string, types []gnft.SetDatatype, concat bool) ([]byte, error) {
	if len(fs) != len(types) {
		return nil, fmt.Errorf("%v does not match the set's type", fs)
	}
	var out []byte
	for i, k := range fs {
		f, err := encodeField(strings.TrimSpace(k), types[i])
		if err != nil {
			return nil, err
		}
		if concat {
			for len(f)%4 != 0 {
				f = append(f, 0)
			}
		}
		out = append(out, f...)
	}
	return out, nil
}

func encodeField(k string, t gnft.SetDatatype) ([]byte, error) {
	switch t.Name {
	case "integer":
		// A generator's value, in host byte order (typeof numgen).
		v, err := parseUint32(k)
		return binary.NativeEndian.AppendUint32(nil, v), err
	case "ipv4_addr", "ipv6_addr":
		a, err := netip.ParseAddr(k)
		if err != nil {
			return nil, err
		}
		return a.AsSlice(), nil
	case "inet_proto":
		p, err := protoNumber(k)
		return []byte{p}, err
	case "inet_service":
		p, err := strconv.ParseUint(k, 10, 16)
		return binary.BigEndian.AppendUint16(nil, uint16(p)), err
	}
	return nil, fmt.Errorf("unsupported key type %s", t.Name)
}

// list implements applier with netlink dumps of the chains and sets of
// the proxy's tables (TableName and the dispatch tables).
func (a *netlinkApplier) list(ctx context.Context) (chains, sets []tobj, err error) {
	buf := 0
	c, closeNS, err := a.conn(&buf)
	if err != nil {
		return nil, nil, err
	}
	defer closeNS()
	cs, err := c.ListChainsOfTableFamily(a.family)
	if err != nil {
		if isNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	tables := map[string]bool{}
	for _, ch := range cs {
		if ch.Table.Name == TableName || isShardTable(ch.Table.Name) {
			chains = append(chains, tobj{tableRef(ch.Table.Name), ch.Name})
			tables[ch.Table.Name] = true
		}
	}
	for t := range tables {
		ss, err := c.GetSets(a.table(tableRef(t)))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return chains, nil, err
		}
		for _, s := range ss {
			sets = append(sets, tobj{tableRef(t), s.Name})
		}
	}
	return chains, sets, nil
}
