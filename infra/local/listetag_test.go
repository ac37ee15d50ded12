package local

import (
	"net/http"
	"strings"
	"testing"
)

// Every listing carries an ETag of its page: polling with If-None-Match is a
// 304 without a body while the page is unchanged, and a 200 with a new tag
// once something on it changed (checked against openapi.yaml by the client).
func TestListETags(t *testing.T) {
	st := startStack(t)
	c := newClient(t, st, "org-etag")
	acct := c.account("aws")
	for _, name := range []string{"etag-1", "etag-2", "etag-3"} {
		c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, name)))
	}
	for _, path := range []string{"/spaces", "/spaces?provider=aws&limit=1", "/cloud-accounts", "/environments", "/autoscaler-policies"} {
		first := c.do("GET", path, nil)
		tag := first.header.Get("ETag")
		if first.status != http.StatusOK || tag == "" {
			t.Fatalf("%s: %d, ETag %q", path, first.status, tag)
		}
		again := c.do("GET", path, nil, "If-None-Match: "+tag)
		if again.status != http.StatusNotModified || len(again.body) != 0 || again.header.Get("ETag") != tag {
			t.Errorf("%s with If-None-Match %s: %d %q ETag %q", path, tag, again.status, again.body, again.header.Get("ETag"))
		}
		if strong := c.do("GET", path, nil, `If-None-Match: "other", `+strings.TrimPrefix(tag, "W/")); strong.status != http.StatusNotModified {
			t.Errorf("%s with a list holding %s without W/: %d", path, tag, strong.status)
		}
		if other := c.do("GET", path, nil, `If-None-Match: W/"l-AAAAAAAAAAAAAAAAAAAAAAAA"`); other.status != http.StatusOK {
			t.Errorf("%s with another tag: %d", path, other.status)
		}
	}

	// A change on the page changes the tag.
	tag := c.do("GET", "/spaces", nil).header.Get("ETag")
	c.must(201, c.do("POST", "/spaces", registerBody("aws", acct, "etag-4")))
	changed := c.do("GET", "/spaces", nil, "If-None-Match: "+tag)
	if changed.status != http.StatusOK || changed.header.Get("ETag") == tag {
		t.Errorf("after a registration: %d, ETag %q (was %q)", changed.status, changed.header.Get("ETag"), tag)
	}
	if n := len(changed.json(t)["items"].([]any)); n != 4 {
		t.Errorf("%d spaces listed, want 4", n)
	}
	// One space: its ETag (its version) answers 304 while it is
	// unchanged, and a change answers it whole with the new tag.
	one := changed.json(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	got := c.do("GET", "/spaces/"+one, nil)
	spaceTag := got.header.Get("ETag")
	if same := c.do("GET", "/spaces/"+one, nil, "If-None-Match: "+spaceTag); same.status != http.StatusNotModified || len(same.body) != 0 || same.header.Get("ETag") != spaceTag {
		t.Errorf("GET /spaces/{id} with If-None-Match %s: %d %q ETag %q", spaceTag, same.status, same.body, same.header.Get("ETag"))
	}
	c.must(200, c.do("PUT", "/spaces/"+one+"/labels", map[string]any{"labels": map[string]string{"etag": "changed"}}))
	if after := c.do("GET", "/spaces/"+one, nil, "If-None-Match: "+spaceTag); after.status != http.StatusOK || after.header.Get("ETag") == spaceTag {
		t.Errorf("GET /spaces/{id} after a change, with the old tag: %d, ETag %q (was %q)", after.status, after.header.Get("ETag"), spaceTag)
	}
	// A page with a next cursor keeps its tag while nothing changes, though
	// the cursor's sealed bytes differ from one answer to the next.
	a, b := c.do("GET", "/spaces?limit=2", nil), c.do("GET", "/spaces?limit=2", nil)
	if a.json(t)["next_cursor"] == nil || a.header.Get("ETag") != b.header.Get("ETag") {
		t.Errorf("two reads of a first page: ETag %q then %q (cursor %v)", a.header.Get("ETag"), b.header.Get("ETag"), a.json(t)["next_cursor"])
	}
}
