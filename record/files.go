package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// File names inside an episode directory.
const (
	MetaFile   = "episode.json"
	InputFile  = "input.jsonl"
	StepsFile  = "steps.jsonl"
	ShotsFile  = "shots.jsonl"
	FramesFile = "frames.jsonl"
	ShotsDir   = "shots"
	VideoDir   = "video"
	lockFile   = ".lock"
)

// Episode statuses in episode.json.
const (
	StatusRecording  = "recording"
	StatusComplete   = "complete"
	StatusIncomplete = "incomplete"
	// StatusInterrupted: the recording is whole, but the episode could not
	// go on (the X server restarted under it); Outcome.Interrupted says why.
	StatusInterrupted = "interrupted"
)

// Meta is episode.json.
type Meta struct {
	SchemaVersion int    `json:"schema_version"`
	ID            string `json:"id"`
	// Source is who acted: human, agent or mixed (both); what was declared
	// at the start until the steps say otherwise.
	Source string    `json:"source"`
	Task   *TaskInfo `json:"task,omitempty"`
	// RecordedBy is who started the recording through the API: the role
	// and a short id of the token (auth.WhoFrom, e.g. "annotator:1a2b3c4d"),
	// never the token; "local" without tokens; empty when deskenv itself
	// started it. An annotator may see and review only episodes with its
	// own name here.
	RecordedBy string `json:"recorded_by,omitempty"`
	Screen     Size   `json:"screen"`
	Model      Size   `json:"model"`
	// Pointer says the observations show the mouse pointer (deskenv's
	// --screenshot-pointer), so a replay draws it too, or not.
	Pointer bool `json:"pointer,omitempty"`
	// Session is the desktop session the episode ran on ("desktop": the
	// panel and wallpaper; "bare"), so a replay starts the same one and its
	// screens compare. Empty in episodes from before it was recorded.
	Session string `json:"session,omitempty"`
	// Animations says the desktop's applications were let animate
	// (deskenv's --animations), so a replay does the same.
	Animations bool  `json:"animations,omitempty"`
	Clock      Clock `json:"clock"`
	// Status is recording while the recorder runs, complete once stopped,
	// interrupted when the episode was cut short under the recording,
	// incomplete when the recorder died before stopping (Open says so, and
	// Repair writes it).
	Status    string     `json:"status"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	DurationS float64    `json:"duration_s"`
	Outcome   *Outcome   `json:"outcome,omitempty"`
	// Pauses are the privacy pauses, in episode seconds: nothing was
	// recorded during them.
	Pauses []Pause    `json:"pauses,omitempty"`
	Video  *VideoInfo `json:"video,omitempty"`
	Counts Counts     `json:"counts"`
	// Dialects counts the steps an agent said in another model's tool, by
	// dialect ("openai", "gemini", "pyautogui"; each step's via), so an
	// episode's dialect is known without reading its steps. Absent when
	// every step came through the computer tool or from a person.
	Dialects map[string]int `json:"dialects,omitempty"`
	// Error says what went wrong while recording, if anything did.
	Error string `json:"error,omitempty"`
}

// TaskInfo names the task an episode works on.
type TaskInfo struct {
	ID          string `json:"id,omitempty"`
	Instruction string `json:"instruction,omitempty"`
	// Seed and Params are the reset's seed and the values it chose for the
	// task's parameters: the variant of the task this episode ran.
	Seed   *int64         `json:"seed,omitempty"`
	Params map[string]any `json:"params,omitempty"`
}

// Size is a width and height in pixels.
type Size struct {
	W int `json:"width"`
	H int `json:"height"`
}

// Clock anchors the episode's time axis: every t in the episode's files is
// seconds since this zero, measured on the monotonic clock.
type Clock struct {
	// Wall is the wall-clock time of the zero.
	Wall time.Time `json:"wall"`
	// MonotonicNS is CLOCK_MONOTONIC at the zero, to line the episode up
	// with other recordings on the same machine.
	MonotonicNS int64 `json:"monotonic_ns"`
	// ExecutorNS is the executor's clock (input.jsonl's mono_ns) at the zero,
	// once an event has been seen.
	ExecutorNS *int64 `json:"executor_ns,omitempty"`
}

// Outcome is how an episode ended, as its task's checker scored it.
type Outcome struct {
	// Reward is the task's reward in [0, 1]; nil when nothing scored it.
	Reward  *float64 `json:"reward"`
	Done    bool     `json:"done"`
	Success *bool    `json:"success,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
	// Interrupted says why the episode was cut short, if it was; such an
	// episode is not done (truncated, not terminated) and unscored.
	Interrupted string `json:"interrupted,omitempty"`
}

// Pause is one privacy pause.
type Pause struct {
	Start float64  `json:"start"`
	End   *float64 `json:"end,omitempty"`
}

// VideoInfo describes the episode's video.
type VideoInfo struct {
	Codec          string `json:"codec"` // "h264", Annex-B byte stream
	Width          int    `json:"width"`
	Height         int    `json:"height"`
	FPS            int    `json:"fps"`
	SegmentSeconds int    `json:"segment_seconds"`
	BitrateKbps    int    `json:"bitrate_kbps"`
}

// Counts are the number of lines or files of each kind.
type Counts struct {
	Events   int `json:"events"`
	Steps    int `json:"steps"`
	Shots    int `json:"shots"`
	Frames   int `json:"frames"`
	Segments int `json:"segments"`
	// DroppedEvents is how many bus events were lost because the recorder
	// fell behind (the bus never blocks input for a slow subscriber).
	DroppedEvents uint64 `json:"dropped_events,omitempty"`
}

// lines appends JSON lines to a file: each line is one write, so a crash
// loses at most the line being written, and sync makes them durable.
type lines struct {
	f     *os.File
	n     int
	dirty bool
	buf   bytes.Buffer
}

func createLines(path string) (*lines, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &lines{f: f}, nil
}

func (l *lines) write(v any) error {
	l.buf.Reset()
	enc := json.NewEncoder(&l.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the line
		return fmt.Errorf("encode a line of %s: %w", filepath.Base(l.f.Name()), err)
	}
	if _, err := l.f.Write(l.buf.Bytes()); err != nil {
		return fmt.Errorf("append to %s: %w", l.f.Name(), err)
	}
	l.n++
	l.dirty = true
	return nil
}

func (l *lines) sync() error {
	if l == nil || !l.dirty {
		return nil
	}
	l.dirty = false
	return l.f.Sync()
}

func (l *lines) close() error {
	if l == nil {
		return nil
	}
	err := l.sync()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// rebuildSteps appends to steps.jsonl the steps of the events no step
// covers yet, and returns them. input.jsonl is reduced again from its start
// (the reducer's state, such as a held modifier, depends on what came
// before), and the steps that begin after the last event a written step
// covers are the missing ones. They have no observation after them.
func rebuildSteps(dir string, rec *Recording) ([]Step, error) {
	covered, next := -1, 0
	for _, st := range rec.Steps {
		if n := len(st.Events); n > 0 {
			covered = max(covered, st.Events[n-1])
		}
		next = max(next, st.Step+1)
	}
	m := rec.Meta
	space := hci.Space{ScreenW: m.Screen.W, ScreenH: m.Screen.H, ModelW: m.Model.W, ModelH: m.Model.H}
	if space.Check() != nil {
		space = hci.Space{} // an older or damaged episode.json: screen coordinates
	}
	var out []Step
	for _, st := range Reduce(rec.Events, space) {
		// Steps come in the order they started: once one is missing, so is
		// everything after it, waits for idle time included.
		if len(out) == 0 && (len(st.Events) == 0 || st.Events[0] <= covered) {
			continue
		}
		st.Step = next + len(out)
		st.Before = lastShotBefore(rec.Shots, st.TStart)
		st.AfterMissing = true
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, nil
	}
	l, err := createLines(filepath.Join(dir, StepsFile))
	if err != nil {
		return nil, fmt.Errorf("rebuild the missing steps: %w", err)
	}
	for i := range out {
		if err := l.write(&out[i]); err != nil {
			l.close()
			return nil, fmt.Errorf("rebuild the missing steps: %w", err)
		}
	}
	return out, l.close()
}

// lastShotBefore is the file of the last observation on disk taken at or
// before t, or "".
func lastShotBefore(shots []Shot, t float64) string {
	file := ""
	for _, sh := range shots {
		if sh.T > t {
			break
		}
		file = sh.File
	}
	return file
}

// writeFileAtomic replaces path with data so that a reader (or a crash)
// sees either the old or the new content, never a mix.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	// CreateTemp makes the file 0600; an episode's files are 0644 like the
	// rest, so a training job under another user can read what was recorded.
	err = tmp.Chmod(0o644)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func writeMeta(dir string, m *Meta) error {
	// The instruction and the reasons are text a person reads: <, > and &
	// stay as they are (wire.Marshal), then the file is indented.
	raw, err := wire.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", MetaFile, err)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Errorf("encode %s: %w", MetaFile, err)
	}
	b.WriteByte('\n')
	return writeFileAtomic(filepath.Join(dir, MetaFile), b.Bytes())
}

// lockEpisode takes the episode's lock for as long as the recorder runs, so
// Open can tell a live recording from one whose recorder died.
func lockEpisode(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("episode %s is being recorded by another recorder: %w", dir, err)
	}
	return f, nil
}

// live reports whether a recorder holds the episode's lock.
func live(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// Recording is an episode read back from disk.
type Recording struct {
	Dir    string
	Meta   Meta
	Events []Event
	Steps  []Step
	Shots  []Shot
	Frames []Frame
	// Torn counts the unfinished last lines that were skipped, one per file
	// at most (what a crash mid-write leaves).
	Torn int
	// Live is set when a recorder is still writing the episode.
	Live bool
}

// Open reads the episode in dir. An episode whose recorder died (kill -9, a
// crash, power loss) opens with everything written up to the crash except
// an unfinished last line, and Meta.Status incomplete. Open changes nothing
// on disk; Repair does.
func Open(dir string) (*Recording, error) {
	rec, err := openMeta(dir)
	if err != nil {
		return nil, err
	}
	var torn int
	if rec.Events, torn, err = readLines[Event](filepath.Join(dir, InputFile)); err != nil {
		return nil, err
	}
	rec.Torn += torn
	if rec.Steps, torn, err = readLines[Step](filepath.Join(dir, StepsFile)); err != nil {
		return nil, err
	}
	rec.Torn += torn
	if rec.Shots, torn, err = readLines[Shot](filepath.Join(dir, ShotsFile)); err != nil {
		return nil, err
	}
	rec.Torn += torn
	// Observations are written when a step first needs them, not quite in
	// the order they were taken.
	sort.SliceStable(rec.Shots, func(i, j int) bool { return rec.Shots[i].N < rec.Shots[j].N })
	if rec.Frames, torn, err = readLines[Frame](filepath.Join(dir, FramesFile)); err != nil {
		return nil, err
	}
	rec.Torn += torn
	return rec, nil
}

// openMeta reads episode.json alone, with the status as Open reports it (a
// recording whose recorder is gone is incomplete), for callers that decide
// from it whether the JSON-lines files are worth reading.
func openMeta(dir string) (*Recording, error) {
	rec := &Recording{Dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s is not an episode directory: it has no %s", dir, MetaFile)
		}
		return nil, err
	}
	if err := json.Unmarshal(b, &rec.Meta); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, MetaFile), err)
	}
	if rec.Meta.SchemaVersion > SchemaVersion {
		return nil, fmt.Errorf("%s has schema version %d; this deskenv reads up to %d: upgrade deskenv",
			filepath.Join(dir, MetaFile), rec.Meta.SchemaVersion, SchemaVersion)
	}
	if rec.Meta.Status == StatusRecording {
		rec.Live = live(dir)
		if !rec.Live {
			rec.Meta.Status = StatusIncomplete
		}
	}
	return rec, nil
}

// readLines reads a JSON-lines file. A last line without its newline is a
// write a crash cut short: it is skipped and counted in torn. A missing file
// is empty.
func readLines[T any](path string) (out []T, torn int, err error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, 0, nil
		}
		return nil, 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(bytes.TrimSpace(line)) > 0 {
				torn++
			}
			return out, torn, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, 0, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, v)
	}
}

// Repair finishes an episode whose recorder died: it cuts unfinished last
// lines off the JSON-lines files, rebuilds the steps of actions that were in
// input.jsonl but had no step yet (a step is written once the screen after
// it is observed, which a kill -9 can cut short), and writes episode.json
// with status incomplete, the counts of what survived and its end time. A live or
// finished episode is left alone. It reports whether it changed anything.
func Repair(dir string) (bool, error) {
	// episode.json alone says whether there is anything to repair: the
	// recorder calls this for every episode at start-up, and reading every
	// line of a finished one would make start-up grow with the dataset.
	head, err := openMeta(dir)
	if err != nil {
		return false, err
	}
	if head.Live || head.Meta.Status != StatusIncomplete {
		return false, nil
	}
	rec, err := Open(dir)
	if err != nil {
		return false, err
	}
	for _, name := range []string{InputFile, StepsFile, ShotsFile, FramesFile} {
		if err := cutTornLine(filepath.Join(dir, name)); err != nil {
			return false, err
		}
	}
	rebuilt, err := rebuildSteps(dir, rec)
	if err != nil {
		return false, err
	}
	rec.Steps = append(rec.Steps, rebuilt...)
	m := rec.Meta
	// The times come from files a crash, or a person, may have damaged: an
	// event ending later than any episode lasts (1e308 s, whose sum is +Inf)
	// or an end past year 9999 would make episode.json unwritable and the
	// episode unrepairable, so they are left out of the end time.
	last := 0.0
	for _, ev := range rec.Events {
		if e := ev.End(); e > last && e <= maxEpisodeSeconds {
			last = e
		}
	}
	end := m.Clock.Wall.Add(time.Duration(last * float64(time.Second)))
	if end.Year() > 9999 {
		end, last = m.Clock.Wall, 0
	}
	m.EndedAt, m.DurationS = &end, last
	m.Counts.Events, m.Counts.Steps, m.Counts.Shots, m.Counts.Frames = len(rec.Events), len(rec.Steps), len(rec.Shots), len(rec.Frames)
	segs := map[int]bool{}
	for _, f := range rec.Frames {
		segs[f.Segment] = true
	}
	m.Counts.Segments = len(segs)
	m.Dialects = dialectCounts(rec.Steps)
	if m.Error == "" {
		m.Error = "the recorder stopped without finishing the episode (killed or crashed); everything written before is kept"
	}
	if err := writeMeta(dir, &m); err != nil {
		return false, err
	}
	os.Remove(filepath.Join(dir, lockFile))
	return true, nil
}

// maxEpisodeSeconds bounds the end time Repair believes: a year.
const maxEpisodeSeconds = 366 * 24 * 60 * 60

func cutTornLine(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if len(b) == 0 || b[len(b)-1] == '\n' {
		return nil
	}
	return os.Truncate(path, int64(bytes.LastIndexByte(b, '\n')+1))
}

// dialectCounts counts steps by the dialect they were said in (Meta.Dialects);
// nil when none was.
func dialectCounts(steps []Step) map[string]int {
	var n map[string]int
	for _, st := range steps {
		if st.Via == "" {
			continue
		}
		if n == nil {
			n = map[string]int{}
		}
		n[st.Via]++
	}
	return n
}
