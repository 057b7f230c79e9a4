package xext_test

import (
	"sync"
	"testing"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
	"github.com/deskenv/deskenv/internal/xext"
)

// TestInitManyConnections sets up extensions on many connections at once, as
// a pool does, under -race: the first Init per extension runs xgb's, the rest
// must still be usable.
func TestInitManyConnections(t *testing.T) {
	d := testrig.Display(t, display.Config{})
	tests := []struct {
		name string
		init func(*xgb.Conn) error
		use  func(*xgb.Conn) error
	}{
		{"MIT-SHM", shm.Init, func(c *xgb.Conn) error { _, err := shm.QueryVersion(c).Reply(); return err }},
		{"XTEST", xtest.Init, func(c *xgb.Conn) error { _, err := xtest.GetVersion(c, 2, 2).Reply(); return err }},
		{"DAMAGE", damage.Init, func(c *xgb.Conn) error { _, err := damage.QueryVersion(c, 1, 1).Reply(); return err }},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 8; i++ {
		c, err := d.Dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A live reader, as every real connection has.
		go func() {
			for {
				if ev, err := c.WaitForEvent(); ev == nil && err == nil {
					return
				}
			}
		}()
		for _, tc := range tests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := xext.Init(c, tc.name, tc.init); err != nil {
					errs <- err
					return
				}
				if err := tc.use(c); err != nil {
					errs <- err
				}
			}()
		}
		xproto.GetInputFocus(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
