package space

import "time"

// What the use cases pass between the store, the queues and the event bus,
// so that none of those adapters needs another's types.

// Deregistered is a space's deregistration as the cascade learns it from
// the store (the table's stream) and announces it ("Space Deregistered").
type Deregistered struct {
	OrgID          string
	SpaceID        string
	Name           string
	Provider       Provider
	CloudAccountID string
	DeletedAt      time.Time
	DeletedBy      string
	// Connectivity is how the space was reached: an agent space's agent
	// is woken so that it learns of the deregistration at once.
	Connectivity Connectivity
}

// Tombstone is what the views that referenced the space show of it.
func (d Deregistered) Tombstone() *Tombstone {
	return &Tombstone{ID: d.SpaceID, Name: d.Name, Provider: d.Provider, DeregisteredAt: d.DeletedAt.UTC(), DeregisteredBy: d.DeletedBy}
}
