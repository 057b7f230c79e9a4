package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The shaped link of deskbench network: the browser in a network namespace
// of its own, a veth pair to the root namespace where the stacks and the
// relay run, and tc tbf on both veth ends for the rate. Delay, jitter and
// loss are the relay's (relay.go): this kernel has no netem.

// netPrefix names everything the link makes, so a run can find and remove
// what an earlier crashed run left.
const netPrefix = "dbnet"

const (
	netNS      = netPrefix + "-browser" // the browser's namespace
	netHostIf  = netPrefix + "-h"       // the veth end in the root namespace
	netInnerIf = netPrefix + "-b"       // the veth end in the browser's namespace
	// A /30 from 10/8 that nothing here routes; the relay listens on the
	// host end, the browser has the other.
	netHostIP  = "10.231.77.1"
	netInnerIP = "10.231.77.2"
	// netPagePort is where every stack's page is served through the relay:
	// one fixed origin, which Chromium is told to treat as secure. A page
	// on plain http from an address other than localhost is not a secure
	// context, and WebCodecs (the websocket fallback's decoder) exists only
	// in secure ones; a real deployment serves HTTPS, which this stands in
	// for.
	netPagePort = "47180"
)

// netLink is the namespace, the veth pair and their qdiscs while they exist.
type netLink struct {
	rateKbit int
	queue    time.Duration // how long tbf holds packets before dropping
}

// checkNetCaps says why the link cannot be made here, or nil: deskbench
// network needs root (namespaces, veth, tc) and the ip and tc commands. The
// benchmark fails with this reason rather than measuring without a link.
func checkNetCaps() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (it makes a network namespace, a veth pair and tc qdiscs): run it as root, e.g. sudo deskbench network")
	}
	for _, cmd := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, fmt.Sprintf("the %s command (Debian: apt-get install iproute2)", cmd))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("deskbench network cannot shape a link here: it needs %s", strings.Join(missing, "; and "))
	}
	return nil
}

// lockLink makes sure one deskbench network at a time uses the link's
// fixed names (the start of a run removes what it finds under them). The
// lock is released when the file closes, also when the process dies.
func lockLink() (*os.File, error) {
	p := filepath.Join(os.TempDir(), netPrefix+".lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another deskbench network is running (it holds %s); its link has the names this one needs: %w", p, err)
	}
	return f, nil
}

// runCmd runs one ip/tc command and words its failure with its output.
func runCmd(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// removeLeftovers deletes a namespace and veth of an earlier run that did
// not clean up (killed, crashed); absent ones are fine.
func removeLeftovers(ctx context.Context) {
	// Deleting the namespace deletes its veth end, and with it the peer.
	runCmd(ctx, "ip", "netns", "del", netNS)
	runCmd(ctx, "ip", "link", "del", netHostIf)
}

// setupLink makes the namespace, the veth pair and the rate limit.
func setupLink(ctx context.Context, rateKbit int, queue time.Duration) (*netLink, error) {
	if err := checkNetCaps(); err != nil {
		return nil, err
	}
	removeLeftovers(ctx)
	steps := [][]string{
		{"ip", "netns", "add", netNS},
		{"ip", "link", "add", netHostIf, "type", "veth", "peer", "name", netInnerIf},
		{"ip", "link", "set", netInnerIf, "netns", netNS},
		{"ip", "addr", "add", netHostIP + "/30", "dev", netHostIf},
		{"ip", "link", "set", netHostIf, "up"},
		{"ip", "netns", "exec", netNS, "ip", "addr", "add", netInnerIP + "/30", "dev", netInnerIf},
		{"ip", "netns", "exec", netNS, "ip", "link", "set", netInnerIf, "up"},
		{"ip", "netns", "exec", netNS, "ip", "link", "set", "lo", "up"},
	}
	l := &netLink{queue: queue}
	for _, s := range steps {
		if err := runCmd(ctx, s[0], s[1:]...); err != nil {
			l.Close()
			return nil, fmt.Errorf("make the shaped link: %w", err)
		}
	}
	if err := l.setRate(ctx, rateKbit); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// tbfArgs shapes one veth end to kbit/s. The burst is 10 ms of the rate
// (at least a few full packets); the queue holds queue's worth of the rate,
// beyond which tbf drops, as a router's full queue does.
func tbfArgs(dev string, kbit int, queue time.Duration) []string {
	burst := max(kbit*1000/8/100, 5000)
	return []string{"qdisc", "replace", "dev", dev, "root", "tbf", "rate", strconv.Itoa(kbit) + "kbit",
		"burst", strconv.Itoa(burst), "latency", strconv.FormatInt(queue.Milliseconds(), 10) + "ms"}
}

// setRate sets the rate both ways (the drop profile calls it mid-run).
func (l *netLink) setRate(ctx context.Context, kbit int) error {
	if err := runCmd(ctx, "tc", tbfArgs(netHostIf, kbit, l.queue)...); err != nil {
		return fmt.Errorf("shape the link: %w", err)
	}
	if err := runCmd(ctx, "ip", append([]string{"netns", "exec", netNS, "tc"}, tbfArgs(netInnerIf, kbit, l.queue)...)...); err != nil {
		return fmt.Errorf("shape the link: %w", err)
	}
	l.rateKbit = kbit
	return nil
}

// Close removes the namespace, the veth pair and their qdiscs; it runs even
// when the benchmark's context was cancelled (Ctrl-C).
func (l *netLink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if err := runCmd(ctx, "ip", "netns", "del", netNS); err != nil {
		errs = append(errs, err)
	}
	// Normally gone with the namespace (the kernel removes the peer a moment
	// later); only a half-made link leaves it.
	for i := 0; i < 20 && hostIfExists(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if hostIfExists() {
		if err := runCmd(ctx, "ip", "link", "del", netHostIf); err != nil && hostIfExists() {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func hostIfExists() bool {
	_, err := os.Stat("/sys/class/net/" + netHostIf)
	return err == nil
}

// chromiumInNS writes a script that starts Chromium inside the namespace,
// for the driver to launch instead of Chromium (DESKENV_CHROMIUM): ip netns
// exec keeps the process's file descriptors, so the DevTools pipe still
// reaches the driver outside.
func chromiumInNS(dir string) (string, error) {
	chromium := os.Getenv("DESKENV_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		return "", fmt.Errorf("chromium: %w (set DESKENV_CHROMIUM)", err)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "chromium-in-"+netNS)
	script := fmt.Sprintf("#!/bin/sh\nexec %s netns exec %s %s --unsafely-treat-insecure-origin-as-secure=http://%s \"$@\"\n",
		shellQuote(ip), netNS, shellQuote(chromium), net.JoinHostPort(netHostIP, netPagePort))
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		return "", err
	}
	return p, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
