package local

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/kubetest"
	"spaces/infra/staticminter"
	"spaces/shared/awsclient"
	"spaces/shared/kubecred"
	"spaces/shared/revisions"
	"spaces/shared/space"
)

// TestRevisionClaimsAgainstARealCluster pushes revisions over HTTP and lets
// the local revisions poller claim them against a real kube-apiserver:
// deployed (server-side apply by field manager "spaces"), failed with the
// cluster's message, stopped after three claims on an inactive space and
// retried once it is active, dead-lettered at the claim after the space was
// deregistered, and refused on the gated environment.
func TestRevisionClaimsAgainstARealCluster(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{})
	creds := kubecred.Credentials{Server: kc.URL, CAData: kc.CAPEM, Token: kc.AdminToken}
	minter := &staticminter.Static{Lookup: func(space.Space) (kubecred.Credentials, bool) { return creds, true }}
	prefix := fmt.Sprintf("r%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Log: slog.New(slog.DiscardHandler), Probing: ProbingConfig{Disabled: true},
		Cascade:   CascadeConfig{Interval: 100 * time.Millisecond},
		Revisions: RevisionsConfig{Minter: minter, Backoff: time.Second, Wait: time.Second},
		Names:     func(id string) string { return prefix + id },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := newClient(t, st, "acme")
	internal := newClient(t, st, "acme", "spaces:internal")
	setStatus := func(id, status string) {
		t.Helper()
		cur := c.do("GET", "/spaces/"+id, nil)
		internal.must(200, internal.do("PATCH", "/spaces/"+id+"/status", map[string]any{"status": status, "reason": "test"},
			"If-Match: "+cur.header.Get("ETag")))
	}

	kube, err := kubernetes.NewForConfig(kc.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spaceID := c.must(201, c.do("POST", "/spaces", registerBody("aws", c.account("aws"), "deploy-target")))["id"].(string)
	setStatus(spaceID, "active")
	env := c.must(201, c.do("POST", "/environments", map[string]any{"name": "web", "space_id": spaceID}))
	if env["namespace"] != "web" {
		t.Fatalf("environment %v", env)
	}
	envID := env["id"].(string)

	configMap := func(name string, data map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data}
	}
	push := func(manifests ...map[string]any) string {
		t.Helper()
		r := c.do("POST", "/environments/"+envID+"/revisions", map[string]any{"manifests": manifests})
		m := c.must(202, r)
		if m["state"] != "pending" || r.header.Get("Location") != "/revisions/"+m["id"].(string) {
			t.Fatalf("pushed %v %v", m, r.header)
		}
		return m["id"].(string)
	}
	waitState := func(id, state string) map[string]any {
		t.Helper()
		var m map[string]any
		eventually(t, "revision "+id+" "+state, func() bool {
			m = c.must(200, c.do("GET", "/revisions/"+id, nil))
			return m["state"] == state
		})
		return m
	}

	// Deployed: the object is in the environment's namespace, applied by
	// the "spaces" field manager.
	waitState(push(configMap("web-config", map[string]any{"greeting": "hello"})), "deployed")
	cm, err := kube.CoreV1().ConfigMaps("web").Get(t.Context(), "web-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["greeting"] != "hello" || len(cm.ManagedFields) == 0 || cm.ManagedFields[0].Manager != "spaces" ||
		cm.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("applied ConfigMap %+v %+v", cm.Data, cm.ManagedFields)
	}

	// Failed, with the cluster's message.
	failed := waitState(push(configMap("bad-config", map[string]any{"n": 5})), "failed")
	if reason, _ := failed["reason"].(string); !strings.Contains(reason, "ConfigMap") {
		t.Errorf("failed without the cluster's message: %v", failed)
	}

	// Inactive: three claims, then stopped; retry refused until active.
	setStatus(spaceID, "inactive")
	stoppedID := push(configMap("later-config", map[string]any{"k": "v"}))
	stopped := waitState(stoppedID, "stopped")
	if stopped["reason"] != "Space inactive" || stopped["attempts"] != float64(3) {
		t.Errorf("stopped %v", stopped)
	}
	if r := c.do("POST", "/revisions/"+stoppedID+"/retry", nil); r.status != 409 {
		t.Errorf("retry on an inactive space: %d %s", r.status, r.body)
	}
	setStatus(spaceID, "active")
	retried := c.must(202, c.do("POST", "/revisions/"+stoppedID+"/retry", nil))
	if retried["state"] != "pending" || retried["attempts"] != float64(0) {
		t.Errorf("retried %v", retried)
	}
	waitState(stoppedID, "deployed")
	if r := c.do("POST", "/revisions/"+stoppedID+"/retry", nil); r.status != 409 {
		t.Errorf("retry of a deployed revision: %d %s", r.status, r.body)
	}

	// Deregistered while a revision waits: dead-lettered at the next claim,
	// and its message is in the DLQ.
	setStatus(spaceID, "inactive")
	doomed := push(configMap("doomed-config", map[string]any{"k": "v"}))
	eventually(t, "a first claim of the doomed revision", func() bool {
		m := c.must(200, c.do("GET", "/revisions/"+doomed, nil))
		return m["attempts"] == float64(1)
	})
	c.must(204, c.do("DELETE", "/spaces/"+spaceID, nil))
	dead := waitState(doomed, "dead-lettered")
	if dead["reason"] != "Space deregistered" {
		t.Errorf("dead-lettered %v", dead)
	}
	out, err := awsclient.SQS(st.AWS, st.EmulatorURL).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(st.Resources["RevisionsDLQ"].URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	var inDLQ []string
	for _, m := range out.Messages {
		var msg revisions.Message
		_ = json.Unmarshal([]byte(aws.ToString(m.Body)), &msg)
		inDLQ = append(inDLQ, msg.RevisionID)
	}
	if len(inDLQ) != 1 || inDLQ[0] != doomed {
		t.Errorf("DLQ holds %v, want [%s]", inDLQ, doomed)
	}

	// The cascade gates the environment: no new revision.
	eventually(t, "the environment gated", func() bool {
		return c.must(200, c.do("GET", "/environments/"+envID, nil))["gate"] != nil
	})
	if r := c.do("POST", "/environments/"+envID+"/revisions", map[string]any{"manifests": []any{configMap("x", nil)}}); r.status != 409 {
		t.Errorf("push to a gated environment: %d %s", r.status, r.body)
	}
}
