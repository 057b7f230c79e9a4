package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/png"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestScreenshotPointer: the agent's screenshots and zooms show the mouse
// pointer by default, as the reference tool's scrot -p screenshots do, and
// --screenshot-pointer=false leaves it out. On the bare root window every
// pixel is the background but the pointer's.
func TestScreenshotPointer(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		name  string
		args  []string
		shown bool
	}{
		{"default", nil, true},
		{"off", []string{"--screenshot-pointer=false"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := stdioClient(t, bin, append([]string{"--apps", "", "--wm", "", "--screen", "640x480x24", "--model-size", "off"}, tt.args...)...)
			callImage(t, c, map[string]any{"action": "mouse_move", "coordinate": []int{200, 150}})
			shot := callImage(t, c, map[string]any{"action": "screenshot"})
			if n := differing(shot, image.Rect(180, 130, 232, 182), shot.At(5, 5)); (n > 0) != tt.shown {
				t.Errorf("screenshot: %d pixels around the pointer at 200,150 differ from the background; want the pointer shown: %v", n, tt.shown)
			}
			if n := differing(shot, image.Rect(400, 300, 640, 480), shot.At(5, 5)); n != 0 {
				t.Errorf("screenshot: %d pixels far from the pointer differ from the background", n)
			}
			// The zoom is of region [150,100,250,200] at full resolution.
			zoom := callImage(t, c, map[string]any{"action": "zoom", "region": []int{150, 100, 250, 200}})
			if n := differing(zoom, zoom.Bounds(), shot.At(5, 5)); (n > 0) != tt.shown {
				t.Errorf("zoom: %d pixels differ from the background; want the pointer shown: %v", n, tt.shown)
			}
		})
	}
}

// callImage calls the computer tool and decodes the screenshot it returns.
func callImage(t *testing.T, c *client.Client, args map[string]any) image.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "computer"
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("computer %v: %v %+v", args, err, res)
	}
	for _, content := range res.Content {
		if ic, ok := content.(mcp.ImageContent); ok {
			raw, err := base64.StdEncoding.DecodeString(ic.Data)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatalf("computer %v: the screenshot: %v", args, err)
			}
			return img
		}
	}
	t.Fatalf("computer %v returned no image: %+v", args, res)
	return nil
}

// differing counts the pixels of r in img that are not bg.
func differing(img image.Image, r image.Rectangle, bg interface{ RGBA() (r, g, b, a uint32) }) int {
	br, bgG, bb, _ := bg.RGBA()
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if pr, pg, pb, _ := img.At(x, y).RGBA(); pr != br || pg != bgG || pb != bb {
				n++
			}
		}
	}
	return n
}
