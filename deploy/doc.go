// Package deploy holds the checks for deskenv's deployment files, which no
// container engine or cluster on a build machine can run: the Dockerfile at
// the repository root (parsed and linted here), docker-compose.yml, and the
// Kubernetes manifests under deploy/base and deploy/overlays (decoded strictly
// into the Kubernetes API types and cross-checked), and those under
// deploy/agent-sandbox for kubernetes-sigs/agent-sandbox (its kinds decoded
// into types transcribed from its CRDs, and held to the StatefulSet's pod). The runtime layout of the
// image is exercised on the host by scripts/check-runtime.sh, which the tests
// run as root.
//
// The package has no API for other packages; its Go files are the Dockerfile
// reader and linter the tests use.
package deploy
