package record

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/deskenv/deskenv/hci"
	"github.com/deskenv/deskenv/internal/wire"
)

// The LeRobot v3 layout (huggingface/lerobot, CODEBASE_VERSION "v3.0", read
// 2026-11-24: lerobot/datasets/utils.py and the LeRobotDataset v3 post):
//
//	meta/info.json                                   features, fps, counts, path templates
//	meta/tasks.parquet                               task_index by task (the task string is the pandas index)
//	meta/episodes/chunk-000/file-000.parquet         one row per episode: length, tasks, its rows and video span
//	data/chunk-000/file-000.parquet                  one row per step, all episodes
//	videos/observation.images.screen/chunk-000/file-NNN.mp4   the recorded H.264, episodes one after another
//
// A row is a step, not a fixed-rate frame: deskenv records actions as they
// happen. frame_index is the step's number in its episode. The video holds
// the recorded frames at a constant rate (fps), the episode's first at
// from_timestamp; a row's timestamp is k/fps for the frame k on screen when
// the step started, so a video-based policy reading the frame at
// from_timestamp + timestamp sees the screen the step acted on. Without
// video the timestamp is the step's start in episode seconds. The video is the recording's own
// H.264, remuxed into MP4 with its capture times (variable frame rate), not
// re-encoded. Episodes recorded without video carry their observation as an
// image (observation.image, PNG bytes) instead; a dataset is one or the
// other.

// The LeRobot feature names deskenv writes.
const (
	leRobotVideoKey = "observation.images.screen"
	leRobotImageKey = "observation.image"
	leRobotVersion  = "v3.0"
	leRobotChunks   = 1000
)

// leRobotRow is one row of data/chunk-000/file-000.parquet.
type leRobotRow struct {
	Index        int64      `parquet:"index"`
	EpisodeIndex int64      `parquet:"episode_index"`
	FrameIndex   int64      `parquet:"frame_index"`
	Timestamp    float32    `parquet:"timestamp"`
	TaskIndex    int64      `parquet:"task_index"`
	Action       []float32  `parquet:"action,list"`
	ActionJSON   string     `parquet:"action.json"`
	Reward       float32    `parquet:"next.reward"`
	Done         bool       `parquet:"next.done"`
	Success      bool       `parquet:"next.success"`
	Image        *ImageCell `parquet:"observation.image,optional"`
}

// leRobotEpisode is one row of meta/episodes/chunk-000/file-000.parquet.
type leRobotEpisode struct {
	EpisodeIndex    int64    `parquet:"episode_index"`
	EpisodeID       string   `parquet:"deskenv.episode_id"`
	Tasks           []string `parquet:"tasks,list"`
	Length          int64    `parquet:"length"`
	DataChunk       int64    `parquet:"data/chunk_index"`
	DataFile        int64    `parquet:"data/file_index"`
	From            int64    `parquet:"dataset_from_index"`
	To              int64    `parquet:"dataset_to_index"`
	VideoChunk      *int64   `parquet:"videos/observation.images.screen/chunk_index,optional"`
	VideoFile       *int64   `parquet:"videos/observation.images.screen/file_index,optional"`
	VideoFrom       *float64 `parquet:"videos/observation.images.screen/from_timestamp,optional"`
	VideoTo         *float64 `parquet:"videos/observation.images.screen/to_timestamp,optional"`
	MetaChunk       int64    `parquet:"meta/episodes/chunk_index"`
	MetaFile        int64    `parquet:"meta/episodes/file_index"`
	DeskenvSource   string   `parquet:"deskenv.source"`
	DeskenvStatus   string   `parquet:"deskenv.status"`
	DeskenvReward   *float64 `parquet:"deskenv.reward,optional"`
	DeskenvFrames   int64    `parquet:"deskenv.video_frames"`
	DeskenvOutcomeS bool     `parquet:"deskenv.success"`
	// The task's variant, as the Parquet export's seed and params_json.
	DeskenvSeed   *int64  `parquet:"deskenv.seed,optional"`
	DeskenvParams *string `parquet:"deskenv.params_json,optional"`
}

// leRobotTask is one row of meta/tasks.parquet.
type leRobotTask struct {
	Task      string `parquet:"task"`
	TaskIndex int64  `parquet:"task_index"`
}

// leRobotActionNames name the action vector: the action's number in hci's
// table, its point and its end point normalised to 0..1 of the model space
// (-1 when the action has none), and its amount (scroll notches, negative
// up or left; a wait's or hold's seconds). The exact action, text and keys
// included, is action.json.
var leRobotActionNames = []string{"action_type", "x", "y", "end_x", "end_y", "amount"}

// leRobotExport writes the LeRobot v3 dataset of the episodes under root
// into the directory out.
func leRobotExport(ctx context.Context, root, out string, opt ExportOptions) (ExportStats, error) {
	st := ExportStats{Sources: map[string]int{}, Tasks: map[string]int{}}
	recs, err := selectEpisodes(ctx, root, opt, &st)
	if err != nil {
		return st, err
	}
	if len(recs) == 0 {
		return st, fmt.Errorf("no episode under %s passes the filters: nothing to export", root)
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return st, fmt.Errorf("%s is not empty: a LeRobot dataset is written into a new or empty directory", out)
	}
	tmp := out + ".partial"
	os.RemoveAll(tmp)
	defer os.RemoveAll(tmp)
	ds := &leRobotSet{dir: tmp, video: allVideo(recs), tasks: map[string]int64{}}
	for i, rec := range recs {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if err := ds.add(ctx, rec); err != nil {
			return st, fmt.Errorf("episode %s: %w", rec.Meta.ID, err)
		}
		st.count(&rec.Meta, len(rec.Steps))
		if opt.Progress != nil {
			opt.Progress(i+1, len(recs), st.Rows)
		}
	}
	if err := ds.finish(ctx); err != nil {
		return st, err
	}
	os.Remove(out) // an empty directory the caller made
	if err := os.Rename(tmp, out); err != nil {
		return st, err
	}
	st.Bytes = dirSize(out)
	st.Card = cardPath(out)
	return st, os.WriteFile(st.Card, []byte(datasetCard(filepath.Join(out, "data"), opt, st)), 0o644)
}

// selectEpisodes opens the episodes under root the options keep.
func selectEpisodes(ctx context.Context, root string, opt ExportOptions, st *ExportStats) ([]*Recording, error) {
	dirs, err := FindEpisodes(root)
	if err != nil {
		return nil, err
	}
	var recs []*Recording
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := Open(dir)
		if err != nil {
			return nil, err
		}
		keep, err := opt.keepReview(dir)
		if err != nil {
			return nil, err
		}
		if rec.Live || !keep || !opt.keep(&rec.Meta) || len(rec.Steps) == 0 {
			st.Skipped++
			continue
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// allVideo says whether every episode has video frames: then the
// observation is the video; else an image per row.
func allVideo(recs []*Recording) bool {
	for _, r := range recs {
		if r.Meta.Video == nil || len(r.Frames) == 0 {
			return false
		}
	}
	return true
}

// leRobotSet is a LeRobot dataset being written.
type leRobotSet struct {
	dir      string
	video    bool
	rows     []leRobotRow
	episodes []leRobotEpisode
	tasks    map[string]int64
	taskList []string
	fps      int
	w, h     int
	mp4      *mp4Writer
	files    int64
}

func (ds *leRobotSet) add(ctx context.Context, rec *Recording) error {
	ep := leRobotEpisode{EpisodeIndex: int64(len(ds.episodes)), EpisodeID: rec.Meta.ID, Length: int64(len(rec.Steps)),
		From: int64(len(ds.rows)), DeskenvSource: rec.Meta.Source, DeskenvStatus: rec.Meta.Status}
	task := leRobotTaskText(&rec.Meta)
	ti, ok := ds.tasks[task]
	if !ok {
		ti = int64(len(ds.taskList))
		ds.tasks[task] = ti
		ds.taskList = append(ds.taskList, task)
	}
	ep.Tasks = []string{task}
	if o := rec.Meta.Outcome; o != nil {
		ep.DeskenvReward, ep.DeskenvOutcomeS = o.Reward, o.Succeeded()
	}
	var err error
	if ep.DeskenvSeed, ep.DeskenvParams, err = taskVariant(&rec.Meta); err != nil {
		return err
	}
	if ds.video {
		if err := ds.addVideo(ctx, rec, &ep); err != nil {
			return err
		}
	}
	rows, err := leRobotRows(rec, ep.EpisodeIndex, ti, int64(len(ds.rows)), ds.fps, !ds.video)
	if err != nil {
		return err
	}
	ds.rows = append(ds.rows, rows...)
	ep.To = int64(len(ds.rows))
	ds.episodes = append(ds.episodes, ep)
	return nil
}

// leRobotTaskText is the task an episode is labelled with: its
// instruction, else its task id, else "free demonstration".
func leRobotTaskText(m *Meta) string {
	switch {
	case m.Task != nil && m.Task.Instruction != "":
		return m.Task.Instruction
	case m.Task != nil && m.Task.ID != "":
		return m.Task.ID
	}
	return "free demonstration"
}

// leRobotRows are an episode's steps as rows.
func leRobotRows(rec *Recording, episode, task, first int64, fps int, embed bool) ([]leRobotRow, error) {
	m := rec.Meta
	rows := make([]leRobotRow, 0, len(rec.Steps))
	for i, s := range rec.Steps {
		aj, err := wire.Marshal(s.Action)
		if err != nil {
			return nil, err
		}
		t := s.TStart
		if !embed {
			t = float64(frameAt(rec.Frames, s.TStart)) / float64(fps)
		}
		r := leRobotRow{Index: first + int64(i), EpisodeIndex: episode, FrameIndex: int64(i), Timestamp: float32(t),
			TaskIndex: task, Action: leRobotAction(s.Action, m.Model), ActionJSON: string(aj)}
		if i == len(rec.Steps)-1 {
			r.Done = m.Status == StatusComplete
			if o := m.Outcome; o != nil {
				if o.Reward != nil {
					r.Reward = float32(*o.Reward)
				}
				r.Success = o.Succeeded()
			}
		}
		if embed && s.Before != "" {
			b, err := os.ReadFile(filepath.Join(rec.Dir, s.Before))
			if err != nil {
				return nil, err
			}
			r.Image = &ImageCell{Bytes: b, Path: filepath.Base(s.Before)}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// frameAt is the index of the frame on screen at episode time t: the last
// captured at or before it (the first when none was yet).
func frameAt(frames []Frame, t float64) int {
	us := int64(math.Round(t * 1e6))
	i := sort.Search(len(frames), func(i int) bool { return frames[i].PTS > us })
	return max(i-1, 0)
}

// leRobotAction is the numeric action vector (leRobotActionNames).
func leRobotAction(a hci.Action, model Size) []float32 {
	v := []float32{float32(slices.Index(hci.Actions(), a.Action)), -1, -1, -1, -1, 0}
	norm := func(c []int, at int) {
		if len(c) == 2 && model.W > 0 && model.H > 0 {
			v[at], v[at+1] = float32(c[0])/float32(model.W), float32(c[1])/float32(model.H)
		}
	}
	if a.StartCoordinate != nil {
		norm(a.StartCoordinate, 1)
		norm(a.Coordinate, 3)
	} else {
		norm(a.Coordinate, 1)
	}
	switch {
	case a.ScrollAmount != nil:
		n := float32(*a.ScrollAmount)
		if a.ScrollDirection == "up" || a.ScrollDirection == "left" {
			n = -n
		}
		v[5] = n
	case a.Duration != nil:
		v[5] = float32(*a.Duration)
	}
	return v
}

// addVideo appends the episode's frames to the current MP4, a new one when
// the screen size or frame rate changes, and notes where they are.
func (ds *leRobotSet) addVideo(ctx context.Context, rec *Recording, ep *leRobotEpisode) error {
	vi := rec.Meta.Video
	if ds.mp4 != nil && (vi.Width != ds.w || vi.Height != ds.h || vi.FPS != ds.fps) {
		if err := ds.mp4.close(ctx); err != nil {
			return err
		}
		ds.mp4, ds.files = nil, ds.files+1
	}
	if ds.mp4 == nil {
		p := filepath.Join(ds.dir, "videos", leRobotVideoKey, "chunk-000", fmt.Sprintf("file-%03d.mp4", ds.files))
		w, err := newMP4Writer(p, vi.FPS)
		if err != nil {
			return err
		}
		ds.mp4, ds.w, ds.h, ds.fps = w, vi.Width, vi.Height, vi.FPS
	}
	first, n, err := ds.mp4.episode(rec)
	if err != nil {
		return err
	}
	fps := float64(ds.fps)
	chunk, file, from, to := int64(0), ds.files, float64(first)/fps, float64(first+n)/fps
	ep.VideoChunk, ep.VideoFile, ep.VideoFrom, ep.VideoTo, ep.DeskenvFrames = &chunk, &file, &from, &to, int64(n)
	return nil
}

func (ds *leRobotSet) finish(ctx context.Context) error {
	if ds.mp4 != nil {
		if err := ds.mp4.close(ctx); err != nil {
			return err
		}
	}
	writes := []func() error{
		func() error {
			return writeParquet(filepath.Join(ds.dir, "data", "chunk-000", "file-000.parquet"), ds.rows, nil)
		},
		func() error {
			return writeParquet(filepath.Join(ds.dir, "meta", "episodes", "chunk-000", "file-000.parquet"), ds.episodes, nil)
		},
		ds.writeTasks,
		ds.writeInfo,
	}
	for _, w := range writes {
		if err := w(); err != nil {
			return err
		}
	}
	return nil
}

// writeTasks writes meta/tasks.parquet with the pandas metadata that makes
// "task" the index when pandas reads it back, as LeRobot expects.
func (ds *leRobotSet) writeTasks() error {
	rows := make([]leRobotTask, len(ds.taskList))
	for i, t := range ds.taskList {
		rows[i] = leRobotTask{Task: t, TaskIndex: int64(i)}
	}
	pandas, _ := json.Marshal(map[string]any{
		"index_columns": []string{"task"}, "column_indexes": []any{}, "creator": map[string]any{"library": "deskenv"},
		"pandas_version": "2.2.3",
		"columns": []map[string]any{
			{"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": nil},
			{"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": nil},
		},
	})
	return writeParquet(filepath.Join(ds.dir, "meta", "tasks.parquet"), rows, []parquet.WriterOption{parquet.KeyValueMetadata("pandas", string(pandas))})
}

func (ds *leRobotSet) writeInfo() error {
	scalar := func(dtype string) map[string]any {
		return map[string]any{"dtype": dtype, "shape": []int{1}, "names": nil}
	}
	features := map[string]any{
		"index": scalar("int64"), "episode_index": scalar("int64"), "frame_index": scalar("int64"),
		"timestamp": scalar("float32"), "task_index": scalar("int64"),
		"action":      map[string]any{"dtype": "float32", "shape": []int{len(leRobotActionNames)}, "names": leRobotActionNames},
		"action.json": scalar("string"), "next.reward": scalar("float32"), "next.done": scalar("bool"), "next.success": scalar("bool"),
	}
	var videoPath any
	fps := ds.fps
	if ds.video {
		videoPath = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
		features[leRobotVideoKey] = map[string]any{"dtype": "video", "shape": []int{ds.h, ds.w, 3}, "names": []string{"height", "width", "channels"},
			"info": map[string]any{"video.height": ds.h, "video.width": ds.w, "video.codec": "h264", "video.pix_fmt": "yuv420p",
				"video.is_depth_map": false, "video.fps": fps, "video.channels": 3, "has_audio": false}}
	} else {
		features[leRobotImageKey] = map[string]any{"dtype": "image", "shape": []int{0, 0, 3}, "names": []string{"height", "width", "channels"}}
		if fps == 0 {
			fps = 1 // steps have no rate; LeRobot needs a number
		}
	}
	info := map[string]any{
		"codebase_version": leRobotVersion, "robot_type": "deskenv", "total_episodes": len(ds.episodes),
		"total_frames": len(ds.rows), "total_tasks": len(ds.taskList), "chunks_size": leRobotChunks,
		"data_files_size_in_mb": 100, "video_files_size_in_mb": 500, "fps": fps,
		"splits":     map[string]string{"train": fmt.Sprintf("0:%d", len(ds.episodes))},
		"data_path":  "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
		"video_path": videoPath, "features": features,
	}
	b, err := wire.Marshal(info)
	if err != nil {
		return err
	}
	p := filepath.Join(ds.dir, "meta", "info.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o644)
}

// writeParquet writes rows to a new Parquet file at p.
func writeParquet[T any](p string, rows []T, opts []parquet.WriterOption) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	defer f.Close()
	opts = append(opts, parquet.Compression(&parquet.Zstd), parquet.CreatedBy("deskenv", "record", "1"))
	w := parquet.NewGenericWriter[T](f, opts...)
	if _, err := w.Write(rows); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return f.Close()
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// mp4Writer writes episodes' H.264 into one MP4, one after another, with
// ffmpeg: the recording's access units go in as they are (no re-encode) and
// come out at a constant rate, one per 1/fps, the episodes back to back.
// The recording's own times are variable (a frame only when the screen
// changed); rows point at frames by number (leRobotRows), so nothing
// depends on them. Written with ffmpeg rather than a Go muxer: the one the
// module proxy serves here drops the last frame from its edit list.
type mp4Writer struct {
	out    string
	raw    *os.File // the access units, Annex-B, until close
	fps    int
	frames int // written so far
}

func newMP4Writer(p string, fps int) (*mp4Writer, error) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		return nil, fmt.Errorf("the lerobot format writes MP4 video with ffmpeg, which is not on PATH (apt-get install ffmpeg): %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	raw, err := os.CreateTemp(filepath.Dir(p), ".raw-*.h264")
	if err != nil {
		return nil, err
	}
	return &mp4Writer{out: p, raw: raw, fps: fps}, nil
}

// episode appends rec's frames and returns where they are: the index of
// its first frame in the file, and their number.
func (w *mp4Writer) episode(rec *Recording) (first, n int, err error) {
	first = w.frames
	segs := map[int][]byte{}
	for _, fr := range rec.Frames {
		seg, ok := segs[fr.Segment]
		if !ok {
			if seg, err = os.ReadFile(filepath.Join(rec.Dir, VideoDir, fmt.Sprintf("%06d.h264", fr.Segment))); err != nil {
				return 0, 0, err
			}
			segs[fr.Segment] = seg
		}
		if fr.Offset+int64(fr.Size) > int64(len(seg)) {
			return 0, 0, fmt.Errorf("frame %d points past the end of segment %d", fr.N, fr.Segment)
		}
		if _, err := w.raw.Write(seg[fr.Offset : fr.Offset+int64(fr.Size)]); err != nil {
			return 0, 0, err
		}
		w.frames++
	}
	return first, w.frames - first, nil
}

// close muxes the access units into the MP4.
func (w *mp4Writer) close(ctx context.Context) error {
	defer os.Remove(w.raw.Name())
	if err := w.raw.Close(); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "ffmpeg", "-v", "error", "-y", "-f", "h264", "-framerate", strconv.Itoa(w.fps),
		"-i", w.raw.Name(), "-c", "copy", "-movflags", "+faststart", w.out)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ffmpeg muxing %s: %w: %s", w.out, err, bytes.TrimSpace(out))
	}
	return nil
}
