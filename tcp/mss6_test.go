package tcp

import (
	"errors"
	"net/netip"
	"testing"
)

// TestMSS6: an endpoint whose local address is IPv6 announces MSS6, by
// default MSS less the IPv6 header's 20 extra bytes; IPv4 (and IPv4-mapped)
// addresses announce MSS.
func TestMSS6(t *testing.T) {
	v4 := ID{Local: netip.MustParseAddrPort("198.18.0.2:80"), Remote: netip.MustParseAddrPort("198.18.0.1:4000")}
	v6 := ID{Local: netip.MustParseAddrPort("[2001:db8::2]:80"), Remote: netip.MustParseAddrPort("[2001:db8::1]:4000")}
	mapped := ID{Local: netip.MustParseAddrPort("[::ffff:198.18.0.2]:80"), Remote: v4.Remote}
	for _, tc := range []struct {
		cfg          Config
		id           ID
		want         int
		wantDefaults int
	}{
		{Config{}, v4, 1460, 1440},
		{Config{}, v6, 1440, 1440},
		{Config{MSS: 1000}, v6, 980, 980},
		{Config{MSS: 1000}, mapped, 1000, 980},
		{Config{MSS: 1000, MSS6: 1200}, v6, 1200, 1200},
		{Config{MSS: 70}, v6, 64, 64},
	} {
		c := tc.cfg.withDefaults()
		if got := c.forID(tc.id).MSS; got != tc.want || c.MSS6 != tc.wantDefaults {
			t.Errorf("%+v for %v: MSS %d, MSS6 %d; want %d, %d", tc.cfg, tc.id, got, c.MSS6, tc.want, tc.wantDefaults)
		}
	}
	for _, mss6 := range []int{63, 65536} {
		if err := (Config{MSS6: mss6}).Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("MSS6 %d: %v, want ErrInvalidConfig", mss6, err)
		}
	}
}
