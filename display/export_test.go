package display

// FirstBackoff lets the supervision tests, which are in package display_test
// so they can start their display through internal/testrig, wait past the
// first restart's backoff.
const FirstBackoff = firstBackoff
