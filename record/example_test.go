package record_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"

	"github.com/deskenv/deskenv/display"
	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/record"
	"github.com/deskenv/deskenv/screen"
)

// A recorder turns what an executor does into an episode on disk: steps
// with their observations before and after, input events and video. Open
// reads it back.
func ExampleRecorder() {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := display.Start(ctx, display.Config{
		WindowManager: []string{}, Apps: [][]string{}, // a bare server
		Logger: quiet,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	exec, err := hci.NewExecutor(d, hci.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer exec.Close()
	capt, err := screen.NewCapturer(d)
	if err != nil {
		log.Fatal(err)
	}
	defer capt.Close()
	space := exec.Space()
	shooter := screen.NewShooter(capt, screen.ShooterOptions{ModelW: space.ModelW, ModelH: space.ModelH})

	dir, err := os.MkdirTemp("", "episodes")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	rec, err := record.New(dir, exec, shooter, capt, record.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer rec.Close()

	ep, err := rec.Start(ctx, record.EpisodeInfo{ID: "example", TaskID: "greet", Source: "agent"})
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range []hci.Action{
		{Action: hci.ActLeftClick, Coordinate: []int{100, 200}},
		{Action: hci.ActType, Text: "hello"},
	} {
		if _, err := exec.Do(ctx, a, hci.SourceAgent); err != nil {
			log.Fatal(err)
		}
	}
	reward := 1.0
	meta, err := rec.Stop(ctx, &record.Outcome{Reward: &reward, Done: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("episode", meta.ID, meta.Status)

	got, err := record.Open(ep.Dir())
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range got.Steps {
		fmt.Println(s.Step, s.Source, s.Action)
	}
	// Output:
	// episode example complete
	// 0 agent {"action":"left_click","coordinate":[100,200]}
	// 1 agent {"action":"type","text":"hello"}
}
