package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// config is what login keeps: one server and its token. The file is the
// user's alone (0600 in a 0700 folder), as gh and az keep theirs.
type config struct {
	Server    string    `json:"server"`
	Token     string    `json:"token"`
	Org       string    `json:"org,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

const configFile = "config.json"

func (a *app) configDir() (string, error) {
	if a.env.ConfigDir != "" {
		return a.env.ConfigDir, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config folder for the token: %w", err)
	}
	return filepath.Join(dir, "spaces"), nil
}

func (a *app) loadConfig() (config, error) {
	var c config
	dir, err := a.configDir()
	if err != nil {
		return c, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, configFile))
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return config{}, fmt.Errorf("%s: %w", filepath.Join(dir, configFile), err)
	}
	return c, nil
}

// saveConfig writes the file whole under another name and renames it, so
// a reader never sees half a token; created 0600 before anything is
// written to it.
func (a *app) saveConfig(c config) (string, error) {
	dir, err := a.configDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, configFile+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", err
	}
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(dir, configFile)
	return path, os.Rename(tmp.Name(), path)
}

func (a *app) removeConfig() error {
	dir, err := a.configDir()
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, configFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
