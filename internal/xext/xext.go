// Package xext is the X plumbing under display: it dials a display within a
// context (Dial), sets up X extensions on a connection without racing xgb,
// and subscribes to the root window's damage (DamageRoot).
//
// xgb's Init functions (shm.Init, xtest.Init, ...) write process-wide maps of
// event and error decoders that the reader goroutine of every open connection
// reads. Calling one while other connections are live (a second desktop of a
// pool starting, a capturer reconnecting after an X server restart) can kill
// the process with "concurrent map read and map write". The decoders an
// extension registers are the same each time, so only the first Init of each
// extension in the process runs xgb's; later connections only record the
// extension's opcode, which is per connection.
//
// Even the first Init of an extension races when other connections are live
// (the pointer's XFIXES, set up at the first screenshot, raced the readers of
// a pool's other desktops under -race). So Dial runs xgb's Init of every
// extension the project uses on the first connection of the process, before
// it hands that connection out: no connection's reader can be reading the
// maps then, since none has asked the server for anything yet.
//
// This is the one place the project keeps process-wide state, because xgb does.
package xext

import (
	"fmt"
	"sync"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/randr"
	"github.com/jezek/xgb/res"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

var (
	mu   sync.Mutex
	done = map[string]bool{}
)

// known are the extensions the project sets up, registered with xgb on the
// first connection (registerAll).
var known = []struct {
	name    string
	xgbInit func(*xgb.Conn) error
}{
	{"MIT-SHM", shm.Init},
	{"XTEST", xtest.Init},
	{"DAMAGE", damage.Init},
	{"XFIXES", xfixes.Init},
	{"X-Resource", res.Init},
	{"RANDR", randr.Init},
}

// registerAll runs xgb's Init of every known extension the server has, once
// in the process, on c: a new connection nothing has used yet. Every other
// new connection gets the opcodes of the known extensions set here too,
// before anyone uses it: xgb's request functions take c.ExtLock for reading
// twice in one call, so a later write lock on a connection in use (an Init
// while another goroutine sends an extension's request) can wait for ever
// behind the second read lock (TestInitManyConnections hung so).
func registerAll(c *xgb.Conn) {
	mu.Lock()
	defer mu.Unlock()
	for _, k := range known {
		if done[k.name] {
			if reply, err := xproto.QueryExtension(c, uint16(len(k.name)), k.name).Reply(); err == nil && reply.Present {
				c.ExtLock.Lock()
				c.Extensions[k.name] = reply.MajorOpcode
				c.ExtLock.Unlock()
			}
			continue
		}
		// An extension the server lacks stays unregistered; Init tries it
		// again on a later connection (another server may have it).
		if k.xgbInit(c) == nil {
			done[k.name] = true
		}
	}
}

// Init sets up the extension name (as xgb spells it: "MIT-SHM", "XTEST",
// "DAMAGE", "XFIXES", "X-Resource") on c, calling xgbInit (such as shm.Init)
// the first time in the process.
func Init(c *xgb.Conn, name string, xgbInit func(*xgb.Conn) error) error {
	mu.Lock()
	if !done[name] {
		defer mu.Unlock()
		if err := xgbInit(c); err != nil {
			return err
		}
		done[name] = true
		return nil
	}
	// Set up already (by Dial, for the known extensions): no write lock.
	c.ExtLock.RLock()
	_, have := c.Extensions[name]
	c.ExtLock.RUnlock()
	if have {
		mu.Unlock()
		return nil
	}
	// Registered: the rest touches only c, so it runs without mu. Held
	// across c's ExtLock, mu once closed a cycle under TestInitManyConnections
	// (a hang of 14 minutes in CI: one Init waited for c.ExtLock holding mu
	// while Dial and the other Inits waited for mu).
	mu.Unlock()
	reply, err := xproto.QueryExtension(c, uint16(len(name)), name).Reply()
	if err != nil {
		return fmt.Errorf("query X extension %s: %w", name, err)
	}
	if !reply.Present {
		return fmt.Errorf("the X server has no %s extension", name)
	}
	c.ExtLock.Lock()
	c.Extensions[name] = reply.MajorOpcode
	c.ExtLock.Unlock()
	return nil
}
