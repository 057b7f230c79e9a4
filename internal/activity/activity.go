// Package activity measures the CPU time a desktop's programs use, so a
// settle can tell an application that has finished drawing from one that
// is still working out what to draw next.
//
// The X server's DAMAGE events say when the screen was drawn on, not
// whether more is coming: an application that draws in two parts with
// 60 ms of work between them looks, after the first part, like one that is
// done. A quiet period long enough to cover such gaps (80 ms) costs every
// action that long. The processes' CPU time tells the two apart for the
// common case: an application that is done sleeps in poll until its next
// event; one that is still computing (laying out a page, reading a
// directory) runs. What it cannot see is work that waits on a timer or on
// another machine, which no quiet period short of the timer sees either.
package activity

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/deskenv/deskenv/internal/proc"
)

// Config says which processes are the desktop's.
type Config struct {
	// UID, when not negative and not this process's own user, is the
	// desktop session's user: every process of that user counts, however
	// it was started (a daemon that left the process tree too).
	UID int
	// Exclude returns the processes that do not count, with everything
	// below them: the X server (it runs the capture a settle makes ahead,
	// which would make the desktop look busy) and its xkbcomp. Nil: none.
	Exclude func() []int
	// FS is the process file system; the zero value is /proc.
	FS proc.FS
}

// Meter adds up the CPU time of the desktop's processes: with a session
// user, that user's processes; without one (deskenv and its desktop run as
// the same user, as in tests), the processes below this one but the
// excluded. It is safe for concurrent use.
type Meter struct {
	cfg   Config
	self  int
	limit int // maxThreads; tests set less

	mu      sync.Mutex
	lastPID int          // /proc/loadavg's last pid at the last listing
	pids    []int        // the desktop's processes at the last listing
	seen    map[int]seen // thread id -> what it had run at the last reading
	round   uint64       // readings so far
	total   time.Duration
}

// seen is a thread's runtime at one reading, and the reading's number, so
// threads that have exited are forgotten.
type seen struct {
	ran   time.Duration
	round uint64
}

// New returns a meter for the desktop cfg describes.
func New(cfg Config) *Meter {
	if cfg.FS.Root == "" {
		cfg.FS = proc.Default()
	}
	if cfg.UID == os.Getuid() {
		cfg.UID = -1
	}
	return &Meter{cfg: cfg, self: os.Getpid(), limit: maxThreads, seen: map[int]seen{}}
}

// Display is what ForDisplay needs of a display (*display.Display has it;
// an internal package may not import it).
type Display interface {
	Credential() *syscall.Credential
	ServerPID() int
}

// ForDisplay returns a meter for the programs of display d, which this
// process started: its session user's processes when it has one, else the
// processes below this one; never its X server or what runs below it.
func ForDisplay(d Display) *Meter {
	uid := -1
	if c := d.Credential(); c != nil {
		uid = int(c.Uid)
	}
	return New(Config{UID: uid, Exclude: func() []int { return []int{d.ServerPID()} }})
}

// maxThreads bounds the threads one reading looks at. Each costs a file
// read (a few microseconds); an agent that starts thousands of threads
// would otherwise make every settle slower and deskenv busier. Past it the
// reading fails, and a settle waits its whole quiet period, as without a
// meter. Chromium with a few tabs runs a few hundred.
const maxThreads = 4096

// Used returns a running total of the CPU time the desktop's threads have
// used, only ever growing: the difference of two calls is the time used
// between them, and not zero when a thread was running, or waiting for a
// CPU, at the second. A thread that appeared since the last call counts with all
// it ran (a program the action started is busy by definition); a thread
// that exited between two calls loses what it ran after the first (rare:
// drawing is done by threads that stay). The first call only takes stock.
func (m *Meter) Used(ctx context.Context) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.list(ctx); err != nil {
		return 0, err
	}
	m.round++
	round := m.round
	read, waiting := 0, false
	for _, pid := range m.pids {
		tids, err := m.cfg.FS.Threads(pid)
		if err != nil {
			continue // exited since the listing
		}
		if read += len(tids); read > m.limit {
			// Forget what was read, so the next reading counts from a
			// fresh stock instead of a partial one.
			clear(m.seen)
			m.round = 0
			return 0, fmt.Errorf("measure the desktop's CPU use: more than %d threads", m.limit)
		}
		for _, tid := range tids {
			ran, err := m.cfg.FS.Runtime(pid, tid)
			if err != nil {
				continue
			}
			// A thread that waits for a CPU has not run, however much it
			// has to do: on a loaded machine (8 desktops on 2 cores) it
			// may wait through a whole window. Running or runnable (R),
			// or in uninterruptible sleep (D, disk or the like): busy.
			if st, err := m.cfg.FS.ThreadStat(pid, tid); err == nil && (st.State == 'R' || st.State == 'D') {
				waiting = true
			}
			prev, ok := m.seen[tid]
			switch {
			case ok && ran >= prev.ran:
				m.total += ran - prev.ran
			case round > 1:
				// New since the last reading (or a thread id reused):
				// all it ran is recent enough to count.
				m.total += ran
			}
			m.seen[tid] = seen{ran: ran, round: round}
		}
	}
	for tid, s := range m.seen {
		if s.round != round {
			delete(m.seen, tid)
		}
	}
	if waiting && round > 1 {
		// Counted as a nanosecond run: it is in this reading's total
		// and every later one, so it tells only the window ending here.
		m.total++
	}
	return m.total, nil
}

// list finds the desktop's processes again when a process or thread was
// created since the last listing (the kernel's last pid moved): listing
// /proc costs a few milliseconds; reading the last pid, microseconds.
func (m *Meter) list(ctx context.Context) error {
	last, err := m.cfg.FS.LastPID()
	if err != nil {
		return fmt.Errorf("measure the desktop's CPU use: %w", err)
	}
	if m.pids != nil && last == m.lastPID {
		return nil
	}
	excluded := map[int]bool{m.self: true}
	if m.cfg.Exclude != nil {
		for _, p := range m.cfg.Exclude() {
			excluded[p] = true
		}
	}
	// Not nil when empty: a nil list means none was made yet.
	pids := make([]int, 0, 16)
	if m.cfg.UID >= 0 {
		// The session user's processes, wherever in the tree: no parent
		// needs reading.
		owned, err := m.cfg.FS.Owned(ctx, m.cfg.UID)
		if err != nil {
			return fmt.Errorf("measure the desktop's CPU use: %w", err)
		}
		for _, pid := range owned {
			if !excluded[pid] {
				pids = append(pids, pid)
			}
		}
	} else {
		tree, err := m.cfg.FS.ReadTree(ctx)
		if err != nil {
			return fmt.Errorf("measure the desktop's CPU use: %w", err)
		}
		// Below this process, neither excluded nor below an excluded
		// process: of its ancestors, the nearest that is this process or
		// excluded (self is among the excluded) is this process. When this
		// process is init (deskenv as a container's entrypoint), every
		// process of its namespace is below it, and a walk up never
		// reports init: there, a process is the desktop's when no
		// excluded process is above it. (Before, such a meter counted
		// nothing, so every settle took the idle path.)
		for _, pid := range tree.PIDs() {
			a, ok := tree.Under(pid, excluded)
			below := ok && a == m.self || !ok && m.self == 1
			if below && !excluded[pid] {
				pids = append(pids, pid)
			}
		}
	}
	m.pids, m.lastPID = pids, last
	return nil
}
