package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// fakeTree writes a procfs under a temporary directory with a stat file
// for each process in stats (its text); an empty text makes the process's
// directory without a stat, as a process that exited between the listing
// and the read leaves it.
func fakeTree(t *testing.T, stats map[int]string) FS {
	t.Helper()
	root := t.TempDir()
	for pid, text := range stats {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if text == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return FS{Root: root}
}

// statOf is a stat line of process pid with parent ppid in group pgrp.
func statOf(pid, ppid, pgrp int) string {
	return fmt.Sprintf("%d (p %d) S %d %d %d", pid, pid, ppid, pgrp, pgrp) + tail
}

// desk is a made-up machine:
//
//	1 init             2 kthreadd
//	├─ 100 deskenv     └─ 3 kworker
//	│  ├─ 200 Xvfb
//	│  │  └─ 201 xkbcomp (Xvfb's group)
//	│  ├─ 300 app (its own group)
//	│  │  └─ 301 (app's group)
//	│  │     └─ 302 (setsid: a group of its own)
//	│  └─ 400 exited between listing and read (no stat)
//	│     └─ 401
//	├─ 600 a daemon reparented to init
//	└─ 800 a stat that does not parse
//	   └─ 801
//	500, whose parent 999 exited before the listing
//	700 and 701, each the other's parent (a pid reused mid-read)
func desk(t *testing.T) FS {
	return fakeTree(t, map[int]string{
		1:   statOf(1, 0, 1),
		2:   statOf(2, 0, 0),
		3:   statOf(3, 2, 0),
		100: statOf(100, 1, 100),
		200: statOf(200, 100, 200),
		201: statOf(201, 200, 200),
		300: statOf(300, 100, 300),
		301: statOf(301, 300, 300),
		302: statOf(302, 301, 302),
		400: "",
		401: statOf(401, 400, 401),
		500: statOf(500, 999, 500),
		600: statOf(600, 1, 600),
		700: statOf(700, 701, 700),
		701: statOf(701, 700, 700),
		800: "800 (broken",
		801: statOf(801, 800, 801),
	})
}

func TestReadTree(t *testing.T) {
	tree, err := desk(t).ReadTree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 2, 3, 100, 200, 201, 300, 301, 302, 401, 500, 600, 700, 701, 801}
	if got := tree.PIDs(); !slices.Equal(got, want) {
		t.Errorf("PIDs = %v, want %v (400 without a stat and 800 with a broken one left out)", got, want)
	}
	for _, c := range []struct{ pid, ppid, pgrp int }{{201, 200, 200}, {302, 301, 302}, {1, 0, 1}} {
		if p, ok := tree.Parent(c.pid); !ok || p != c.ppid {
			t.Errorf("Parent(%d) = %d, %v; want %d", c.pid, p, ok, c.ppid)
		}
		if g, ok := tree.Group(c.pid); !ok || g != c.pgrp {
			t.Errorf("Group(%d) = %d, %v; want %d", c.pid, g, ok, c.pgrp)
		}
	}
	for _, pid := range []int{400, 800, 999} {
		if _, ok := tree.Parent(pid); ok {
			t.Errorf("Parent(%d): found, want a process not in the tree", pid)
		}
		if _, ok := tree.Group(pid); ok {
			t.Errorf("Group(%d): found, want a process not in the tree", pid)
		}
	}

	if _, err := (FS{Root: filepath.Join(t.TempDir(), "none")}).ReadTree(context.Background()); err == nil {
		t.Error("ReadTree of a missing root: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := desk(t).ReadTree(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadTree with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestUnder asks the made-up machine's tree, read whole and walked a stat
// at a time, which root a process is below: both answer alike.
func TestUnder(t *testing.T) {
	fs := desk(t)
	tree, err := fs.ReadTree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		pid   int
		roots []int
		want  int // 0: below none
	}{
		{"parent", 201, []int{200}, 200},
		{"grandparent", 302, []int{300}, 300},
		{"the nearest of two", 302, []int{100, 300}, 300},
		{"far up", 302, []int{100}, 100},
		{"not its own ancestor", 300, []int{300}, 0},
		{"another branch", 201, []int{300}, 0},
		{"no roots", 201, nil, 0},
		{"init is never reported", 600, []int{1}, 0},
		{"below init and deskenv", 201, []int{1, 100}, 100},
		{"a kernel thread below kthreadd", 3, []int{2}, 2},
		{"an exited parent ends the walk", 401, []int{100}, 0},
		{"an exited parent that is a root counts", 401, []int{400}, 400},
		{"a root exited before the listing counts", 500, []int{999}, 999},
		{"a process not in the tree", 400, []int{100}, 0},
		{"below a broken stat", 801, []int{1}, 0},
		{"a loop of parents ends", 700, []int{100}, 0},
		{"a loop of parents, a root in it", 700, []int{701}, 701},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			roots := map[int]bool{}
			for _, r := range c.roots {
				roots[r] = true
			}
			for _, under := range []struct {
				name string
				f    func(int, map[int]bool) (int, bool)
			}{{"Tree", tree.Under}, {"FS", fs.Under}} {
				got, ok := under.f(c.pid, roots)
				if ok != (c.want != 0) || got != c.want {
					t.Errorf("%s.Under(%d, %v) = %d, %v; want %d", under.name, c.pid, c.roots, got, ok, c.want)
				}
			}
		})
	}
}

func TestBelow(t *testing.T) {
	tree, err := desk(t).ReadTree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		roots []int
		want  []int
	}{
		{[]int{100}, []int{200, 201, 300, 301, 302}},
		{[]int{300}, []int{301, 302}},
		{[]int{200, 300}, []int{201, 301, 302}},
		{[]int{400, 999}, []int{401, 500}},
		{[]int{1}, nil},
		{nil, nil},
	}
	for _, c := range cases {
		roots := map[int]bool{}
		for _, r := range c.roots {
			roots[r] = true
		}
		if got := tree.Below(roots); !slices.Equal(got, c.want) {
			t.Errorf("Below(%v) = %v, want %v", c.roots, got, c.want)
		}
	}
}

// TestUnderDepth: a tree answers for a chain of parents of any depth; a
// walk a stat at a time gives up past maxWalk ancestors.
func TestUnderDepth(t *testing.T) {
	stats := map[int]string{100: statOf(100, 1, 100)}
	leaf := 100
	for range maxWalk + 5 {
		stats[leaf+1] = statOf(leaf+1, leaf, 100)
		leaf++
	}
	fs := fakeTree(t, stats)
	tree, err := fs.ReadTree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	roots := map[int]bool{100: true}
	if r, ok := tree.Under(leaf, roots); !ok || r != 100 {
		t.Errorf("Tree.Under(%d levels down) = %d, %v; want 100", leaf-100, r, ok)
	}
	if r, ok := fs.Under(leaf, roots); ok {
		t.Errorf("FS.Under(%d levels down) = %d, want no answer past %d ancestors", leaf-100, r, maxWalk)
	}
	if r, ok := fs.Under(100+maxWalk, roots); !ok || r != 100 {
		t.Errorf("FS.Under(%d levels down) = %d, %v; want 100", maxWalk, r, ok)
	}
}

// TestOwned lists a made-up machine's processes by owner; giving a
// directory to another user needs root.
func TestOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a process directory another user's")
	}
	const other = 61999
	fs := fakeTree(t, map[int]string{10: "", 11: "", 12: "", 13: ""})
	for _, pid := range []int{11, 13} {
		if err := os.Chown(filepath.Join(fs.Root, strconv.Itoa(pid)), other, other); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		uid  int
		want []int
	}{
		{other, []int{11, 13}},
		{os.Geteuid(), []int{10, 12}},
		{other + 1, nil},
	}
	for _, c := range cases {
		got, err := fs.Owned(context.Background(), c.uid)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Owned(%d) = %v, %v; want %v", c.uid, got, err, c.want)
		}
	}
	if _, err := (FS{Root: filepath.Join(t.TempDir(), "none")}).Owned(context.Background(), other); err == nil {
		t.Error("Owned of a missing root: no error")
	}
}

// TestTreeReal reads the real /proc for a shell this test starts in a
// group of its own and the sleep(1) it starts.
func TestTreeReal(t *testing.T) {
	sh := exec.Command("sh", "-c", "sleep 60 & wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); _ = sh.Wait() })
	self, shell := os.Getpid(), sh.Process.Pid
	fs := Default()
	ctx := context.Background()

	var tree Tree
	var below []int
	for deadline := time.Now().Add(10 * time.Second); len(below) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the shell started nothing within 10 s")
		}
		var err error
		if tree, err = fs.ReadTree(ctx); err != nil {
			t.Fatal(err)
		}
		below = tree.Below(map[int]bool{shell: true})
	}
	if len(below) != 1 {
		t.Fatalf("below the shell: %v, want its sleep alone", below)
	}
	sleep := below[0]
	if p, ok := tree.Parent(shell); !ok || p != self {
		t.Errorf("Parent(shell) = %d, %v; want this process %d", p, ok, self)
	}
	if g, ok := tree.Group(sleep); !ok || g != shell {
		t.Errorf("Group(sleep) = %d, %v; want the shell's group %d", g, ok, shell)
	}
	if !slices.Contains(tree.PIDs(), self) {
		t.Error("this process is not in the tree")
	}
	for _, c := range []struct {
		roots map[int]bool
		want  int
	}{
		{map[int]bool{self: true}, self},
		{map[int]bool{self: true, shell: true}, shell},
	} {
		if r, ok := tree.Under(sleep, c.roots); !ok || r != c.want {
			t.Errorf("Tree.Under(sleep, %v) = %d, %v; want %d", c.roots, r, ok, c.want)
		}
		if r, ok := fs.Under(sleep, c.roots); !ok || r != c.want {
			t.Errorf("FS.Under(sleep, %v) = %d, %v; want %d", c.roots, r, ok, c.want)
		}
	}
	owned, err := fs.Owned(ctx, os.Geteuid())
	if err != nil || !slices.Contains(owned, shell) || !slices.Contains(owned, sleep) || !slices.Contains(owned, self) {
		t.Errorf("Owned(%d) = %v, %v; want this process, the shell and its sleep among them", os.Geteuid(), owned, err)
	}
}
