// Package layering holds no code, only the test that keeps deskenv's package
// layering as docs/ARCHITECTURE.md draws it: core packages never import
// features, features never import one another, and only the composition and
// the commands import everything.
package layering
