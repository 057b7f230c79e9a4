//go:build race

package stream

// raceDetector is true under -race.
const raceDetector = true
