package space

import "time"

// CloudAccount is a connected cloud account: how Spaces authenticates to the
// provider for the clusters registered through it. It stores no secrets, only
// the identifiers federation needs.
type CloudAccount struct {
	ID         string            `json:"id"`
	OrgID      string            `json:"org_id"`
	Provider   Provider          `json:"provider"`
	Name       string            `json:"name"`
	Connection map[string]string `json:"connection"`
	CreatedAt  time.Time         `json:"created_at"`
	Version    int64             `json:"version"`
}

// NewAccountInput is what a caller supplies to connect a cloud account.
type NewAccountInput struct {
	Provider   Provider
	Name       string
	Connection map[string]string
}

// Validate reports every bad field at once.
func (in NewAccountInput) Validate() error {
	var fe fieldErrors
	if checkProvider(&fe, in.Provider) {
		if in.Connection == nil {
			fe.add("connection", "is required")
		} else {
			checkKeys(&fe, "connection", in.Connection, connectionKeys[in.Provider])
		}
	}
	if in.Name == "" {
		fe.add("name", "is required")
	} else {
		checkName(&fe, in.Name)
	}
	return fe.err("the cloud account is not valid")
}
