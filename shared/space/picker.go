package space

import "slices"

// Picker names a consumer that offers spaces to choose from; each leaves out
// the spaces DESIGN's gating rules exclude.
type Picker string

const (
	PickerEnvironment    Picker = "environment"
	PickerAutoscaler     Picker = "autoscaler"
	PickerEventReadiness Picker = "event-readiness"
)

// Pickers lists every picker.
var Pickers = []Picker{PickerEnvironment, PickerAutoscaler, PickerEventReadiness}

func (p Picker) Valid() bool { return slices.Contains(Pickers, p) }

// Allows reports whether the picker may offer s (as observed). Inactive spaces
// are left out of every picker; synthetic spaces are left out of the
// scaling-aware ones (autoscaler and event readiness).
func (p Picker) Allows(s Space) bool {
	if s.Deleted() || s.Status == Inactive {
		return false
	}
	if s.Synthetic && (p == PickerAutoscaler || p == PickerEventReadiness) {
		return false
	}
	return true
}
