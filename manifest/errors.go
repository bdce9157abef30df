package manifest

import (
	"errors"
	"fmt"
)

// ErrInvalidManifest wraps every problem found while validating a manifest.
var ErrInvalidManifest = errors.New("invalid manifest")

// ErrInvalidConfig wraps every problem CheckConfigs finds in a manifest's
// config blocks. It wraps ErrInvalidManifest, so a caller that refuses an
// invalid manifest refuses a bad config block the same way.
var ErrInvalidConfig = fmt.Errorf("%w: function config", ErrInvalidManifest)

// ErrShortWindow is returned when an output stream's duplicate window is
// shorter than twice the longest time after which a function may publish the
// same output again; a redelivery after the window would store it twice.
var ErrShortWindow = errors.New("duplicate window shorter than the redelivery horizon")

// ErrInboxPrefix is returned for an inbox or reply prefix the generated
// permissions cannot safely name: not one literal subject, or one in NATS's
// own $ namespace.
var ErrInboxPrefix = errors.New("not a usable inbox prefix")
