package control

import (
	"io"
	"net/http"

	"github.com/deskenv/deskenv/auth"
)

// The roles and tokens moved to package auth, which also holds the front
// door every route sits behind. These names stay so code written against
// control keeps compiling; new code uses package auth.
type (
	Role       = auth.Role
	Token      = auth.Token
	AuthConfig = auth.Config
	Auth       = auth.Auth
)

const (
	RoleAgent      = auth.RoleAgent
	RoleOperator   = auth.RoleOperator
	RoleViewer     = auth.RoleViewer
	RoleLocal      = auth.RoleLocal
	MinTokenLength = auth.MinTokenLength
)

var (
	ErrNoToken  = auth.ErrNoToken
	ErrBadToken = auth.ErrBadToken
)

// NewAuth is auth.New.
func NewAuth(c AuthConfig) (*Auth, error) { return auth.New(c) }

// ParseRole is auth.ParseRole.
func ParseRole(s string) (Role, error) { return auth.ParseRole(s) }

// ParseTokens is auth.ParseTokens.
func ParseTokens(r io.Reader, name string) ([]Token, error) { return auth.ParseTokens(r, name) }

// LoadTokensFile is auth.LoadTokensFile.
func LoadTokensFile(path string) ([]Token, error) { return auth.LoadTokensFile(path) }

// Allows is auth.Allows.
func Allows(role Role, need ...Role) bool { return auth.Allows(role, need...) }

// writeError writes {"error": msg}: auth.WriteError, the one JSON error.
func writeError(w http.ResponseWriter, status int, msg string) { auth.WriteError(w, status, msg) }
