package proc

import (
	"context"
	"fmt"
	"slices"
)

// Tree is the process tree as one reading of /proc found it: each
// process's parent and process group. Processes come and go while it is
// read, so it is a snapshot, not the truth of one instant: a process that
// exited before its stat was read is missing, and a walk up that meets a
// missing parent stops there.
type Tree struct {
	procs map[int]node
}

type node struct{ ppid, pgrp int }

// ReadTree reads the parent and process group of every process: a stat
// file read per process (a few milliseconds on a busy machine). A caller
// that asks about a few processes only reads less with FS.Under.
func (p FS) ReadTree(ctx context.Context) (Tree, error) {
	pids, err := p.PIDs(ctx)
	if err != nil {
		return Tree{}, fmt.Errorf("read the process tree: %w", err)
	}
	t := Tree{procs: make(map[int]node, len(pids))}
	for _, pid := range pids {
		if err := ctx.Err(); err != nil {
			return Tree{}, fmt.Errorf("read the process tree: %w", err)
		}
		st, err := p.Stat(pid)
		if err != nil {
			// Exited since the listing (or a stat that does not parse,
			// which no kernel writes): left out, as a process that
			// exited before the listing is.
			continue
		}
		t.procs[pid] = node{ppid: st.PPID, pgrp: st.PGRP}
	}
	return t, nil
}

// PIDs lists the tree's processes in increasing order.
func (t Tree) PIDs() []int {
	out := make([]int, 0, len(t.procs))
	for pid := range t.procs {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// Parent is pid's parent; false if pid is not in the tree.
func (t Tree) Parent(pid int) (int, bool) {
	n, ok := t.procs[pid]
	return n.ppid, ok
}

// Group is pid's process group; false if pid is not in the tree.
func (t Tree) Group(pid int) (int, bool) {
	n, ok := t.procs[pid]
	return n.pgrp, ok
}

// Under returns the nearest of pid's ancestors (its parent, the parent's
// parent, ...) that is in roots, and whether there is one; pid itself is
// not its own ancestor. See under for where the walk ends.
func (t Tree) Under(pid int, roots map[int]bool) (int, bool) {
	// A tree read over a few milliseconds could, with a pid reused
	// between two reads, hold a loop of parents: a walk longer than the
	// tree has processes is in one, and ends. No real chain of parents is
	// cut short by it.
	return under(pid, roots, t.Parent, len(t.procs)+1)
}

// Below lists, in increasing order, the processes of the tree that are
// below one of roots (Under finds one).
func (t Tree) Below(roots map[int]bool) []int {
	var out []int
	for _, pid := range t.PIDs() {
		if _, ok := t.Under(pid, roots); ok {
			out = append(out, pid)
		}
	}
	return out
}

// Under is Tree.Under reading each parent's stat as the walk goes up, for
// a caller that asks about a few processes: a Tree reads every process's
// stat first. At most maxWalk ancestors are looked at, as each costs a
// file read and the reads, spread over time, could meet a loop of parents
// through a reused pid.
func (p FS) Under(pid int, roots map[int]bool) (int, bool) {
	parent := func(pid int) (int, bool) {
		st, err := p.Stat(pid)
		return st.PPID, err == nil
	}
	return under(pid, roots, parent, maxWalk)
}

// maxWalk bounds FS.Under's walk: a desktop's chains of parents are a
// dozen deep or so.
const maxWalk = 64

// under walks up from pid's parent, through at most limit ancestors, to
// the first that is in roots. It ends without one at init (pid 1) or the
// kernel (0): init adopts every orphan, so being below it says nothing of
// who started a process, and it is never reported. It ends too at an
// ancestor whose own parent cannot be read (it exited), once that ancestor
// is checked against roots: a root that exited still counts for its
// children, which may not be reparented yet.
func under(pid int, roots map[int]bool, parent func(int) (int, bool), limit int) (int, bool) {
	a, ok := parent(pid)
	if !ok {
		return 0, false
	}
	for n := 0; a > 1 && n < limit; n++ {
		if roots[a] {
			return a, true
		}
		if a, ok = parent(a); !ok {
			return 0, false
		}
	}
	return 0, false
}

// Owned lists the processes owned by user uid (see Owner) in directory
// order: those of a user that runs nothing but a desktop's session are
// its programs, however they were started.
func (p FS) Owned(ctx context.Context, uid int) ([]int, error) {
	pids, err := p.PIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the processes of user %d: %w", uid, err)
	}
	var out []int
	for _, pid := range pids {
		if owner, err := p.Owner(pid); err == nil && owner == uid {
			out = append(out, pid)
		}
	}
	return out, nil
}
