package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// state is what the agent keeps across restarts, in a Secret of its own
// namespace that the manifests create empty and its Role lets it get and
// update, by name, and nothing else. The bootstrap is single use, so a
// restarted pod (a crash, a node drain, an upgrade) carries on with the
// stored credential; bootstrapSHA256 records which bootstrap it came
// from, so a new bootstrap (a reinstall, POST /spaces/{id}/agent-bootstrap)
// is told apart from the used one still mounted.
type state struct {
	Credential      string
	ExpiresAt       time.Time
	SpaceID         string
	BootstrapSHA256 string
	// TokenSignature is the signature of Credential's presence token
	// (space.PresenceToken), presented on each MQTT CONNECT when the
	// authorizer signs ("": none answered).
	TokenSignature string
}

const (
	keyCredential = "credential"
	keyExpiresAt  = "expires_at"
	keySpaceID    = "space_id"
	keyBootstrap  = "bootstrap_sha256"
	keySignature  = "token_signature"
)

func hashToken(t string) string {
	s := sha256.Sum256([]byte(t))
	return hex.EncodeToString(s[:])
}

// stateSecret reads and writes the state Secret.
type stateSecret struct {
	kube            kubernetes.Interface
	namespace, name string
}

func (s stateSecret) load(ctx context.Context) (state, error) {
	sec, err := s.kube.CoreV1().Secrets(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return state{}, fmt.Errorf("the agent's state Secret %s/%s does not exist (the manifests create it): %w", s.namespace, s.name, err)
		}
		return state{}, fmt.Errorf("read the state Secret %s/%s: %w", s.namespace, s.name, err)
	}
	st := state{Credential: string(sec.Data[keyCredential]), SpaceID: string(sec.Data[keySpaceID]),
		BootstrapSHA256: string(sec.Data[keyBootstrap]), TokenSignature: string(sec.Data[keySignature])}
	if v := sec.Data[keyExpiresAt]; len(v) > 0 {
		if st.ExpiresAt, err = time.Parse(time.RFC3339, string(v)); err != nil {
			return state{}, fmt.Errorf("the state Secret's %s is not a time: %w", keyExpiresAt, err)
		}
	}
	return st, nil
}

// save writes st over the Secret's data: a read, then an update at the
// read's resourceVersion (a lost race reads again).
func (s stateSecret) save(ctx context.Context, st state) error {
	for range 3 {
		sec, err := s.kube.CoreV1().Secrets(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read the state Secret %s/%s: %w", s.namespace, s.name, err)
		}
		sec.Data = map[string][]byte{
			keyCredential: []byte(st.Credential),
			keyExpiresAt:  []byte(st.ExpiresAt.UTC().Format(time.RFC3339)),
			keySpaceID:    []byte(st.SpaceID),
			keyBootstrap:  []byte(st.BootstrapSHA256),
			keySignature:  []byte(st.TokenSignature),
		}
		sec.StringData = nil
		_, err = s.kube.CoreV1().Secrets(s.namespace).Update(ctx, sec, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("update the state Secret %s/%s: %w", s.namespace, s.name, err)
		}
		return nil
	}
	return fmt.Errorf("update the state Secret %s/%s: conflicting writers", s.namespace, s.name)
}
