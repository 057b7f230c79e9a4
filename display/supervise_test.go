package display_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/internal/testrig"
)

// patience is longer than testrig.Patience: a restart waits out its
// backoff, and the session comes back after its server.
const patience = 20 * time.Second

// sessionConfig is the appliance's session, openbox and an xterm, asked for
// by name: testrig.Display gives a bare server to a Config that names
// neither (TestStartDefaultSession checks that Start's own default is
// this session).
func sessionConfig(t *testing.T) display.Config {
	t.Helper()
	testrig.NeedTools(t, "openbox", "xterm")
	return display.Config{Home: t.TempDir(), WindowManager: []string{"openbox"}, Apps: [][]string{{"xterm"}}}
}

// startDesktop starts a desktop with the X server restarted on a crash, as
// the appliance runs it.
func startDesktop(t *testing.T, cfg display.Config) *display.Display {
	t.Helper()
	cfg.RestartOnCrash = true
	return testrig.Display(t, cfg)
}

func processByName(d *display.Display, name string) (display.Process, bool) {
	for _, p := range d.Processes() {
		if p.Process == name {
			return p, true
		}
	}
	return display.Process{}, false
}

// TestSupervisionRestartsTheSession kills the window manager or the xterm
// with SIGKILL: each comes back as a new process, and Exits says what died,
// how and that it was restarted.
func TestSupervisionRestartsTheSession(t *testing.T) {
	tests := []struct {
		name, process, role string
	}{
		{"window manager", "openbox", display.RoleWindowManager},
		{"app", "xterm", display.RoleApp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := startDesktop(t, sessionConfig(t))
			before, ok := processByName(d, tc.process)
			if !ok || !before.Running || before.Role != tc.role {
				t.Fatalf("processes %+v: want a running %s as the %s", d.Processes(), tc.process, tc.role)
			}
			if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			testrig.WaitWithin(t, patience, tc.process+" to be restarted", func() bool {
				p, ok := processByName(d, tc.process)
				return ok && p.Running && p.PID != before.PID
			})
			after, _ := processByName(d, tc.process)
			exits := d.Exits()
			if len(exits) != 1 {
				t.Fatalf("exits %+v: want one", exits)
			}
			e := exits[0]
			if e.Process != tc.process || e.Role != tc.role || e.PID != before.PID || e.Exited != "signal: killed" ||
				!e.Restarted || e.NewPID != after.PID || e.RestartedAt == nil || e.Error != "" {
				t.Errorf("exit %+v: want %s (pid %d) killed and restarted as pid %d", e, tc.process, before.PID, after.PID)
			}
			if len(d.Processes()) != 2 {
				t.Errorf("processes %+v: want exactly the window manager and the xterm", d.Processes())
			}
			if err := d.SessionHealth(); err != nil {
				t.Errorf("session health after the restart: %v", err)
			}
		})
	}
}

// TestSupervisionLeavesStoppedProcessesAlone: what deskenv stops itself
// (a session restart, KillSession) is neither restarted nor logged.
func TestSupervisionLeavesStoppedProcessesAlone(t *testing.T) {
	d := startDesktop(t, sessionConfig(t))
	ctx := context.Background()
	if err := d.RestartSession(ctx); err != nil {
		t.Fatal(err)
	}
	killed := d.KillSession(false)
	if len(killed) != 2 {
		t.Errorf("KillSession killed %v, want the window manager and the xterm", killed)
	}
	if err := d.StartSession(ctx); err != nil {
		t.Fatal(err)
	}
	// Longer than the first restart's backoff: a wrongly supervised
	// process would have been restarted by now.
	time.Sleep(3 * display.FirstBackoff)
	if exits := d.Exits(); len(exits) != 0 {
		t.Errorf("exits after restarting the session %+v: want none", exits)
	}
	procs := d.Processes()
	if len(procs) != 2 || !procs[0].Running || !procs[1].Running {
		t.Errorf("processes %+v: want openbox and the xterm running, nothing twice", procs)
	}
}

// TestAppThatExitsNormallyStaysClosed: an app that exits with status 0 was
// closed or was a one-shot; it is logged, not restarted.
func TestAppThatExitsNormallyStaysClosed(t *testing.T) {
	testrig.NeedTools(t)
	d := startDesktop(t, display.Config{WindowManager: []string{}, Apps: [][]string{{"sh", "-c", "sleep 0.2"}}})
	testrig.WaitWithin(t, patience, "the one-shot app to exit", func() bool { return len(d.Exits()) == 1 })
	time.Sleep(3 * display.FirstBackoff)
	exits := d.Exits()
	if len(exits) != 1 {
		t.Fatalf("exits %+v: want one", exits)
	}
	if e := exits[0]; e.Process != "sh" || e.Restarted || e.Exited != "exit status 0" || !strings.Contains(e.Error, "exited normally") {
		t.Errorf("exit %+v: want it logged as exited normally and not restarted", e)
	}
	if procs := d.Processes(); len(procs) != 1 || procs[0].Running {
		t.Errorf("processes %+v: want the one app, not running", procs)
	}
}

// TestWindowManagerThatCannotComeBack: a window manager that dies at every
// start makes SessionHealth an error that names it.
func TestWindowManagerThatCannotComeBack(t *testing.T) {
	testrig.NeedTools(t)
	d := startDesktop(t, display.Config{WindowManager: []string{"sh", "-c", "exit 3"}, Apps: [][]string{}})
	testrig.WaitWithin(t, patience, "the session to be unhealthy", func() bool { return d.SessionHealth() != nil })
	err := d.SessionHealth()
	if !strings.Contains(err.Error(), "window manager sh") {
		t.Errorf("session health = %v, want it to name the window manager", err)
	}
	exits := d.Exits()
	if len(exits) < 2 || exits[0].Exited != "exit status 3" || exits[0].Role != display.RoleWindowManager {
		t.Errorf("exits %+v: want the window manager's repeated deaths", exits)
	}
}

// TestServerDeathIsLogged kills Xvfb: the display comes back with a new
// session, Exits has the server's death and restart, and the session's
// processes, which died with their server, are not logged as faults of
// their own.
func TestServerDeathIsLogged(t *testing.T) {
	d := startDesktop(t, sessionConfig(t))
	server := d.ServerPID()
	old := map[string]int{}
	for _, p := range d.Processes() {
		old[p.Process] = p.PID
	}
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testrig.WaitWithin(t, patience, "the X server to be restarted", func() bool {
		e := d.LastServerExit()
		return e != nil && e.Restarted
	})
	e := d.LastServerExit()
	if e.Process != "Xvfb" || e.Role != display.RoleServer || e.PID != server || e.Exited != "signal: killed" || e.NewPID != d.ServerPID() {
		t.Errorf("server exit %+v: want Xvfb pid %d killed, restarted as %d", e, server, d.ServerPID())
	}
	if err := d.Health(context.Background()); err != nil {
		t.Fatalf("health after the restart: %v", err)
	}
	// Past any backoff a session process would wrongly be restarted in.
	time.Sleep(3 * display.FirstBackoff)
	if exits := d.Exits(); len(exits) != 1 {
		t.Errorf("exits %+v: want only the server's", exits)
	}
	for _, p := range d.Processes() {
		if !p.Running || p.PID == old[p.Process] {
			t.Errorf("process %+v after the server restart: want a new, running one", p)
		}
	}
	if n := len(d.Processes()); n != 2 {
		t.Errorf("processes %+v: want openbox and the xterm", d.Processes())
	}
}
