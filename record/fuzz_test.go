package record

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/deskenv/deskenv/internal/hang"
)

// A recording cut short by a crash, as its files were left: episode.json
// still says recording, and the last line of input.jsonl is torn.
const (
	seedMeta = `{"schema_version":1,"id":"ep-1","source":"agent","task":{"id":"hello-file","instruction":"do"},` +
		`"screen":{"width":1280,"height":800},"model":{"width":1280,"height":800},` +
		`"clock":{"wall":"2025-06-01T12:00:00Z","monotonic_ns":123456789,"executor_ns":5},` +
		`"status":"recording","started_at":"2025-06-01T12:00:00Z","duration_s":0,` +
		`"pauses":[{"start":1.5,"end":2}],"video":{"codec":"h264","width":1280,"height":800,"fps":30,"segment_seconds":10,"bitrate_kbps":2000},` +
		`"counts":{"events":0,"steps":0,"shots":0,"frames":0,"segments":0}}`
	seedInput = `{"i":0,"t":0.5,"seq":1,"mono_ns":500000000,"source":"agent","kind":"action","action":{"action":"left_click","coordinate":[10,20]},"dur":0.05}` + "\n" +
		`{"i":1,"t":1,"seq":2,"source":"human","kind":"input","input":{"type":"key_down","keysym":65293},"key":"Return"}` + "\n" +
		`{"i":2,"t":1.5,"kind":"pause"}` + "\n" + `{"i":3,"t":2,"kind":"resume"}` + "\n" + `{"i":4,"t":2.5,"kind":"act`
	seedSteps  = `{"step":0,"source":"agent","action":{"action":"left_click","coordinate":[10,20]},"t_start":0.5,"t_end":0.55,"events":[0]}` + "\n"
	seedShots  = `{"n":0,"t":0.4,"file":"shots/000000.png","w":1280,"h":800,"hash":42}` + "\n"
	seedFrames = `{"n":0,"segment":0,"index":0,"pts_us":0,"key":true,"offset":0,"size":100}` + "\n" +
		`{"n":1,"segment":1,"index":0,"pts_us":33333,"offset":0,"size":50}` + "\n{\"n\":2"
)

// FuzzRepair writes an episode directory from fuzzed episode.json and
// JSON-lines files and runs Open and Repair on it, as the recorder does at
// start-up for every episode it finds. Neither may panic; an episode that
// Open reads as incomplete is repaired, after which it reads back without
// error, with no torn lines, counts that match its files and status
// incomplete; and repairing it again changes nothing.
func FuzzRepair(f *testing.F) {
	f.Add([]byte(seedMeta), []byte(seedInput), []byte(seedSteps), []byte(seedShots), []byte(seedFrames))
	f.Add([]byte(seedMeta), []byte(""), []byte(""), []byte(""), []byte(""))
	f.Add(bytes.Replace([]byte(seedMeta), []byte(`"recording"`), []byte(`"complete"`), 1), []byte(seedInput), []byte(seedSteps), []byte(""), []byte(""))
	f.Add(bytes.Replace([]byte(seedMeta), []byte(`"schema_version":1`), []byte(`"schema_version":2`), 1), []byte(""), []byte(""), []byte(""), []byte(""))
	f.Add([]byte(seedMeta), []byte(`{"i":0,"t":1e308,"dur":1e308,"kind":"input"}`+"\n"), []byte(""), []byte(""), []byte(""))
	f.Add(bytes.Replace([]byte(seedMeta), []byte(`"2025-06-01T12:00:00Z","monotonic_ns"`), []byte(`"9999-12-31T23:59:59Z","monotonic_ns"`), 1),
		[]byte(`{"i":0,"t":100000000,"kind":"input"}`+"\n"), []byte(""), []byte(""), []byte(""))
	f.Add([]byte(`{`), []byte("garbage\n"), []byte("{}\n"), []byte("[]\n"), []byte("null\n"))
	// Repair syncs what it writes, which on a disk costs most of each run:
	// the episodes live in memory (/dev/shm) where there is one.
	base := f.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "deskenv-fuzz-"); err == nil {
		base = shm
		f.Cleanup(func() { os.RemoveAll(shm) })
	}
	f.Fuzz(func(t *testing.T, meta, input, steps, shots, frames []byte) {
		defer hang.Guard([][]byte{meta, input, steps, shots, frames})()
		dir, err := os.MkdirTemp(base, "ep-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		for name, b := range map[string][]byte{MetaFile: meta, InputFile: input, StepsFile: steps, ShotsFile: shots, FramesFile: frames} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before, openErr := Open(dir)
		changed, err := Repair(dir)
		if err != nil {
			if changed {
				t.Fatalf("Repair reported a change and an error: %v", err)
			}
			if openErr == nil && before.Meta.Status == StatusIncomplete {
				t.Fatalf("Open read the episode as incomplete, but Repair could not finish it: %v", err)
			}
			return
		}
		if !changed {
			if openErr == nil && before.Meta.Status == StatusIncomplete {
				t.Fatalf("Open read the episode as incomplete, but Repair left it alone")
			}
			return
		}
		if openErr != nil {
			t.Fatalf("Repair changed an episode that Open refused (%v)", openErr)
		}
		rec, err := Open(dir)
		if err != nil {
			t.Fatalf("the repaired episode does not open: %v", err)
		}
		m := rec.Meta
		switch {
		case rec.Torn != 0:
			t.Fatalf("the repaired episode still has %d torn lines", rec.Torn)
		case m.Status != StatusIncomplete:
			t.Fatalf("the repaired episode has status %q", m.Status)
		case m.Counts.Events != len(rec.Events) || m.Counts.Steps != len(rec.Steps) || m.Counts.Shots != len(rec.Shots) || m.Counts.Frames != len(rec.Frames):
			t.Fatalf("the repaired episode counts %+v, its files hold %d events, %d steps, %d shots, %d frames",
				m.Counts, len(rec.Events), len(rec.Steps), len(rec.Shots), len(rec.Frames))
		case m.EndedAt == nil || m.Error == "":
			t.Fatalf("the repaired episode has no end time or no error: %+v", m)
		}
		first, err := os.ReadFile(filepath.Join(dir, MetaFile))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Repair(dir); err != nil {
			t.Fatalf("a second Repair failed: %v", err)
		}
		second, err := os.ReadFile(filepath.Join(dir, MetaFile))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("a second Repair rewrote episode.json:\n%s\n%s", first, second)
		}
	})
}
