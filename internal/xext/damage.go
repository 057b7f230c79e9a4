package xext

import (
	"fmt"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"
)

// DamageRoot sets up XFIXES and DAMAGE on c and creates a damage object on
// the root window of c's default screen that reports at level (one of
// damage.ReportLevel*), so c's events carry a damage.NotifyEvent when the
// screen is drawn on. The object lives as long as c; what to do with the
// events is the caller's: the settle (screen) wants NonEmpty and empties
// the region itself, deskbench answers wants RawRectangles to time every
// drawing request.
//
// The extensions are set up with Init, not xgb's Init functions, since
// other connections of the process are live by then.
func DamageRoot(c *xgb.Conn, level byte) (damage.Damage, error) {
	if err := Init(c, "XFIXES", xfixes.Init); err != nil {
		return 0, fmt.Errorf("set up XFIXES for damage regions: %w", err)
	}
	// DAMAGE needs XFIXES 2 (regions) announced first.
	if _, err := xfixes.QueryVersion(c, 5, 0).Reply(); err != nil {
		return 0, fmt.Errorf("query the XFIXES version: %w", err)
	}
	if err := Init(c, "DAMAGE", damage.Init); err != nil {
		return 0, fmt.Errorf("set up DAMAGE: %w", err)
	}
	if _, err := damage.QueryVersion(c, 1, 1).Reply(); err != nil {
		return 0, fmt.Errorf("query the DAMAGE version: %w", err)
	}
	id, err := damage.NewDamageId(c)
	if err != nil {
		return 0, fmt.Errorf("allocate a damage id: %w", err)
	}
	root := xproto.Setup(c).DefaultScreen(c).Root
	if err := damage.CreateChecked(c, id, xproto.Drawable(root), level).Check(); err != nil {
		return 0, fmt.Errorf("track damage on the root window: %w", err)
	}
	return id, nil
}
