package appliance

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Two kinds of users (docs/DEPLOY.md, "Users"): deskenv's own, which owns its
// state (tasks, episodes, baselines, tokens), and the desktop session's,
// which runs the window manager, the apps, the bash trait and every program
// the agent or a person starts. The session's user cannot read or write
// deskenv's files, signal it, or read its command line or environment; in
// pool mode every desktop has a session user of its own.

// DefaultSessionUser is the session user deskenv creates when it runs as
// root and none is named; pool mode appends the desktop's index.
const DefaultSessionUser = "deskenv-desk"

// SessionHomes is where the session users' homes go by default when the
// session runs as a user of its own (deskenv's data directory may sit in
// root's home, which no other user can enter).
const SessionHomes = "/var/lib/deskenv/homes"

// sessionUser is the user one desktop's session runs as.
type sessionUser struct {
	Name     string
	UID, GID uint32
}

func (u *sessionUser) credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
}

// isolation says whether the desktops run apart from deskenv's user: the
// "isolation" detail of /health.
type isolation struct {
	Separated    bool     `json:"separated"`
	SessionUsers []string `json:"session_users,omitempty"`
	Why          string   `json:"why,omitempty"`

	users []*sessionUser // one per desktop when Separated
	claim *userClaim     // their locks, held until release
}

// sessionUserNames are the names --session-user gives for n desktops: one
// name for a single desktop; in pool mode a comma-separated list of n names,
// or a prefix to which the desktop's index is appended.
func sessionUserNames(flag string, n int) ([]string, error) {
	if flag == "" {
		return nil, nil
	}
	if strings.Contains(flag, ",") {
		names := splitList(flag, ",")
		if len(names) != n {
			return nil, fmt.Errorf("--session-user %q names %d users for %d desktops: name one per desktop, or give a prefix (users PREFIX0, PREFIX1, ...)", flag, len(names), n)
		}
		return names, nil
	}
	if n == 1 {
		return []string{flag}, nil
	}
	names := make([]string, n)
	for i := range names {
		names[i] = flag + strconv.Itoa(i)
	}
	return names, nil
}

// canSwitchUsers reports whether this process may start programs as another
// user: root, or CAP_SETUID and CAP_SETGID in its effective set (the image's
// binary carries them as file capabilities).
func canSwitchUsers() (bool, string) {
	if os.Geteuid() == 0 {
		return true, ""
	}
	missing := missingCaps(unix.CAP_SETUID, unix.CAP_SETGID)
	if len(missing) == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("deskenv runs as uid %d without %s: it cannot start the desktop's programs as another user (run it as root, or give the binary cap_setuid,cap_setgid: see docs/DEPLOY.md)",
		os.Geteuid(), strings.Join(missing, ", "))
}

var capNames = map[int]string{
	unix.CAP_CHOWN: "CAP_CHOWN", unix.CAP_DAC_OVERRIDE: "CAP_DAC_OVERRIDE", unix.CAP_FOWNER: "CAP_FOWNER",
	unix.CAP_KILL: "CAP_KILL", unix.CAP_SETGID: "CAP_SETGID", unix.CAP_SETUID: "CAP_SETUID",
}

// missingCaps lists the capabilities of caps not in this process's
// effective set.
func missingCaps(caps ...int) []string {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	var eff uint64
	if err := unix.Capget(&hdr, &data[0]); err == nil {
		eff = uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	}
	var out []string
	for _, c := range caps {
		if eff&(1<<uint(c)) == 0 {
			out = append(out, capNames[c])
		}
	}
	return out
}

// resolveIsolation decides who the n desktops' sessions run as. As root it
// creates missing session users (useradd --system); otherwise they must
// exist. Separation that cannot be had is not an error: the result says why,
// and the caller says so loudly.
func resolveIsolation(cfg *Config, n int, log *slog.Logger) (isolation, error) {
	if cfg.Display != "" {
		return isolation{Why: "attached to an existing display (--display): its session is not deskenv's to start, and runs as whoever started it"}, nil
	}
	flag, auto := cfg.SessionUser, cfg.SessionUserAuto
	if flag == "" && os.Geteuid() == 0 {
		flag, auto = DefaultSessionUser, true
	}
	if flag == "" {
		return isolation{Why: "no --session-user given and deskenv does not run as root: the desktop runs as deskenv's own user, which can read deskenv's files (tasks, episodes) and signal it"}, nil
	}
	wanted, err := sessionUserNames(flag, n)
	if err != nil {
		return isolation{}, err
	}
	if ok, why := canSwitchUsers(); !ok {
		return isolation{Why: why}, nil
	}
	lockDir := userLockDir()
	if lockDir != "" {
		// The locks guard against a second deskenv on the machine, an
		// operator's mistake, not an attacker: without a place for them
		// deskenv still starts, and says what it cannot guard.
		if err := os.MkdirAll(lockDir, 0o700); err != nil {
			log.Warn("no lock for the session users: a second deskenv on this machine running desktops as the same user would go unnoticed", "dir", lockDir, "err", err)
			lockDir = ""
		}
	}
	names, claim, err := claimSessionUsers(lockDir, flag, n, auto)
	if err != nil {
		return isolation{}, err
	}
	if names[0] != wanted[0] {
		log.Warn("the session user deskenv would run as is in use by another deskenv on this machine: this one runs as another",
			"wanted", strings.Join(wanted, ","), "session_users", strings.Join(names, ","))
	}
	iso := isolation{Separated: true, claim: claim}
	seen := map[uint32]string{}
	for _, name := range names {
		u, err := lookupOrCreateUser(name, log)
		if err != nil {
			claim.release()
			return isolation{}, err
		}
		var bad error
		switch {
		case u.UID == 0:
			bad = fmt.Errorf("--session-user %s is root: the desktop's programs must run as an unprivileged user", name)
		case int(u.UID) == os.Geteuid():
			bad = fmt.Errorf("--session-user %s is deskenv's own user (uid %d): name another, so the desktop cannot reach deskenv's files", name, u.UID)
		case seen[u.UID] != "":
			bad = fmt.Errorf("--session-user: %s and %s are the same user (uid %d): each desktop needs a user of its own, or they read each other's files", seen[u.UID], name, u.UID)
		}
		if bad != nil {
			claim.release()
			return isolation{}, bad
		}
		seen[u.UID] = name
		iso.users = append(iso.users, u)
		iso.SessionUsers = append(iso.SessionUsers, name)
	}
	if os.Geteuid() != 0 {
		if missing := missingCaps(unix.CAP_KILL, unix.CAP_CHOWN, unix.CAP_FOWNER, unix.CAP_DAC_OVERRIDE); len(missing) > 0 {
			log.Warn("deskenv lacks capabilities the separated session needs: without CAP_KILL a reset cannot stop the session's programs, "+
				"without CAP_CHOWN, CAP_FOWNER and CAP_DAC_OVERRIDE it cannot restore the session user's home (docs/DEPLOY.md)",
				"missing", strings.Join(missing, ","))
		}
	}
	return iso, nil
}

// lookupOrCreateUser finds the user name, creating it (a system user with
// its own group, /bin/bash for the terminal and the bash trait, no home made:
// deskenv makes and owns that) when it is missing and this process is root.
func lookupOrCreateUser(name string, log *slog.Logger) (*sessionUser, error) {
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) && os.Geteuid() == 0 {
		home := filepath.Join(SessionHomes, name)
		out, cerr := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", home, "--shell", "/bin/bash", "--comment", "deskenv desktop session", name).CombinedOutput()
		if cerr != nil {
			return nil, fmt.Errorf("create the session user %s (useradd): %w: %s", name, cerr, strings.TrimSpace(string(out)))
		}
		log.Info("created the desktop's session user", "user", name)
		u, err = user.Lookup(name)
	}
	if err != nil {
		return nil, fmt.Errorf("session user %s: %w (create it, e.g. useradd --system --user-group --shell /bin/bash %s, or run deskenv as root once)", name, err, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("session user %s has uid %q, gid %q: want numbers", name, u.Uid, u.Gid)
	}
	return &sessionUser{Name: name, UID: uint32(uid), GID: uint32(gid)}, nil
}

// ownHome makes home the session user's: owned by it, mode 0700, so no other
// desktop's user can enter. A home this process made earlier (deskenv's
// own files) is handed over whole; a home that belongs to a third user is
// an error rather than something to take. The session user must be able to
// reach it through its parents.
func ownHome(home string, u *sessionUser) error {
	if mine, err := os.UserHomeDir(); err == nil {
		if rel, err := filepath.Rel(home, mine); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return fmt.Errorf("--home %s holds deskenv's own user's home %s: the desktop's user would get deskenv's files; pick another", home, mine)
		}
	}
	fi, err := os.Lstat(home)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("--home %s is not a directory", home)
	case st.Uid == u.UID:
	case int(st.Uid) == os.Geteuid():
		self := uint32(os.Geteuid())
		err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if fi, err := os.Lstat(p); err == nil && fi.Sys().(*syscall.Stat_t).Uid == self {
				return os.Lchown(p, int(u.UID), int(u.GID))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("give the desktop's home %s to its user %s: %w", home, u.Name, err)
		}
	default:
		return fmt.Errorf("--home %s belongs to uid %d, neither deskenv's user nor the session user %s (uid %d): pick another, or chown it to %s", home, st.Uid, u.Name, u.UID, u.Name)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		return fmt.Errorf("make the desktop's home %s private (0700): %w", home, err)
	}
	if ok, why := userCan(filepath.Dir(home), u.UID, u.GID, 0o1); !ok {
		return fmt.Errorf("the session user %s cannot reach its home %s: %s; pick a --home elsewhere", u.Name, home, why)
	}
	return nil
}

// userCan reports whether a process of uid and gid, with no supplementary
// groups (how the session runs), may access path as want says (bits 4 read,
// 2 write, 1 search/execute), walking the permission bits of every
// directory on the way. ACLs are not read. The reason names the first
// directory in the way.
func userCan(path string, uid, gid uint32, want fs.FileMode) (bool, string) {
	if uid == 0 {
		return true, "root"
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return false, err.Error()
	}
	allows := func(p string, bits fs.FileMode) (bool, error) {
		fi, err := os.Stat(p)
		if err != nil {
			return false, err
		}
		st := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		var have fs.FileMode
		switch {
		case st.Uid == uid:
			have = perm >> 6 & 7
		case st.Gid == gid:
			have = perm >> 3 & 7
		default:
			have = perm & 7
		}
		return have&bits == bits, nil
	}
	var dirs []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		dirs = append([]string{d}, dirs...)
		if d == "/" {
			break
		}
	}
	for _, d := range dirs {
		if ok, err := allows(d, 0o1); err != nil || !ok {
			return false, fmt.Sprintf("%s is not searchable by uid %d", d, uid)
		}
	}
	ok, err := allows(path, want)
	if err != nil {
		return false, err.Error()
	}
	if !ok {
		return false, fmt.Sprintf("%s does not allow it (mode %v) to uid %d", path, want, uid)
	}
	return true, ""
}

// warnReachable says loudly when the session user can read or write any of
// deskenv's own files: the tasks (their evaluators and solutions), the
// episodes, the tokens file.
func warnReachable(cfg *Config, episodes string, u *sessionUser, log *slog.Logger) {
	if u == nil {
		return
	}
	check := func(what, path string, dir bool) {
		if path == "" {
			return
		}
		if _, err := os.Stat(path); err != nil {
			return
		}
		if ok, _ := userCan(path, u.UID, u.GID, 0o4); ok {
			log.Warn("the desktop's session user can read "+what+": the agent can read it too; make it unreadable to "+u.Name+" (e.g. chmod 0700 and owned by deskenv's user)",
				"path", path, "session_user", u.Name)
		}
		if ok, _ := userCan(path, u.UID, u.GID, 0o2); ok && dir {
			log.Warn("the desktop's session user can write "+what+": the agent can change it; make it unwritable to "+u.Name,
				"path", path, "session_user", u.Name)
		}
		if !dir {
			return
		}
		ents, err := os.ReadDir(path)
		if err != nil {
			return
		}
		for i, e := range ents {
			if i == 1000 {
				break
			}
			p := filepath.Join(path, e.Name())
			if ok, _ := userCan(p, u.UID, u.GID, 0o4); ok {
				log.Warn("the desktop's session user can read a file in "+what+": the agent can read it too",
					"path", p, "session_user", u.Name)
				return
			}
		}
	}
	check("the tasks directory (evaluators and solutions)", cfg.Tasks, true)
	check("the episodes directory", episodes, true)
	check("the tokens file", cfg.TokensFile, false)
}

// release gives up the session users for other deskenvs on the machine,
// once the desktops that ran as them are closed.
func (iso *isolation) release() {
	if iso != nil {
		iso.claim.release()
	}
}

// announceIsolation says at start who the desktops run as, and loudly when
// they run as deskenv's own user.
func announceIsolation(iso isolation, log *slog.Logger) {
	if iso.Separated {
		log.Info("the desktop session runs as a user of its own", "session_users", strings.Join(iso.SessionUsers, ","))
		return
	}
	log.Warn("THE DESKTOP IS NOT SEPARATED FROM DESKENV: "+iso.Why+"; the bash and files traits are refused unless --allow-shared-user", "separated", false)
}

// detail is /health's "isolation" detail for the desktop whose session runs
// as u.
func (iso *isolation) detail(u *sessionUser) map[string]any {
	if iso == nil {
		return nil
	}
	if u != nil {
		return map[string]any{"separated": true, "session_user": u.Name}
	}
	return map[string]any{"separated": false, "why": iso.Why}
}

// sharedUserOK refuses a trait that hands the agent a shell or the file
// system when the session runs as deskenv's own user, unless told.
func (a *Desktop) sharedUserOK(trait string) error {
	if a.seat.session != nil || a.cfg.AllowSharedUser {
		return nil
	}
	why := "the desktop runs as deskenv's own user"
	if iso := a.seat.iso; iso != nil && iso.Why != "" {
		why = iso.Why
	}
	return fmt.Errorf("--mcp-traits %s: refused, because %s; the agent would get deskenv's user (its tasks, episodes and tokens). Run deskenv as root or with --session-user and the capabilities to switch to it, or pass --allow-shared-user to accept this", trait, why)
}
