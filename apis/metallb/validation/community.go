package validation

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
)

// Errors a community string can fail with; ErrInvalidCommunityFormat
// means "not a community value", which in a BGPAdvertisement may still be
// the name of an alias.
var (
	ErrInvalidCommunityValue  = errors.New("invalid community value")
	ErrInvalidCommunityFormat = errors.New("invalid community format")
)

// Community is a BGP community: a standard one (RFC 1997, "AS:value",
// two 16-bit halves in Value) or a large one (RFC 8092,
// "large:global:local1:local2").
type Community struct {
	Large bool
	// Value is the 32-bit standard community (upper half the AS).
	Value uint32
	// Global, Local1, Local2 are the parts of a large community.
	Global, Local1, Local2 uint32
}

// String is "AS:value" or "large:g:l1:l2".
func (c Community) String() string {
	if c.Large {
		return fmt.Sprintf("large:%d:%d:%d", c.Global, c.Local1, c.Local2)
	}
	return fmt.Sprintf("%d:%d", c.Value>>16, c.Value&0xffff)
}

// ParseCommunity parses "1234:5678" or "large:1:2:3" with MetalLB's
// messages.
func ParseCommunity(s string) (Community, error) {
	fs := strings.Split(s, ":")
	switch len(fs) {
	case 2:
		var v [2]uint64
		for i := range 2 {
			n, err := strconv.ParseUint(fs[i], 10, 16)
			if err != nil {
				return Community{}, fmt.Errorf("%w: invalid section %q of community %q, err: %q", ErrInvalidCommunityValue, fs[i], s, err)
			}
			v[i] = n
		}
		return Community{Value: uint32(v[0]<<16 | v[1])}, nil
	case 4:
		if fs[0] != "large" {
			return Community{}, fmt.Errorf("%w: invalid marker for large community, expected community to be of format large:<uint32>:<uint32>:<uint32> but got %q instead", ErrInvalidCommunityValue, s)
		}
		var v [3]uint32
		for i := 1; i < 4; i++ {
			n, err := strconv.ParseUint(fs[i], 10, 32)
			if err != nil {
				return Community{}, fmt.Errorf("%w: invalid section %q of community %q, err: %q", ErrInvalidCommunityValue, fs[i], s, err)
			}
			v[i-1] = uint32(n)
		}
		return Community{Large: true, Global: v[0], Local1: v[1], Local2: v[2]}, nil
	}
	return Community{}, fmt.Errorf("%w: %s", ErrInvalidCommunityFormat, s)
}

// Communities resolves the aliases of Community objects into values. Two
// aliases of one name (in any objects) conflict.
func Communities(cs []metallbv1beta1.Community) (map[string]Community, error) {
	out := map[string]Community{}
	for _, c := range cs {
		for _, a := range c.Spec.Communities {
			v, err := ParseCommunity(a.Value)
			if err != nil {
				return nil, fmt.Errorf("parsing community %q: %s", a.Name, err)
			}
			if _, dup := out[a.Name]; dup {
				return nil, fmt.Errorf("duplicate definition of community %q", a.Name)
			}
			out[a.Name] = v
		}
	}
	return out, nil
}

// ResolveCommunity returns an alias's value, or parses s as a value.
// A string that is neither an alias nor a value gives an error wrapping
// ErrInvalidCommunityFormat: the alias may not exist yet.
func ResolveCommunity(s string, aliases map[string]Community) (Community, error) {
	if v, ok := aliases[s]; ok {
		return v, nil
	}
	return ParseCommunity(s)
}
