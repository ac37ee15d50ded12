package eventfilter

import "testing"

func TestMatch(t *testing.T) {
	p, err := Compile(`{"eventName": ["MODIFY", "INSERT"], "d": {"k": [{"prefix": "SPACE#"}], "new": {"x": [{"exists": true}]}, "old": {"x": [{"exists": false}]}, "n": [3]}}`)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		event string
		want  bool
	}{
		{`{"eventName": "MODIFY", "d": {"k": "SPACE#1", "new": {"x": "a"}, "old": {}, "n": 3.0}}`, true},
		{`{"eventName": "INSERT", "d": {"k": "SPACE#1", "new": {"x": "a"}, "n": 3}}`, true},                 // absent parent: x absent
		{`{"eventName": "REMOVE", "d": {"k": "SPACE#1", "new": {"x": "a"}, "n": 3}}`, false},                // literal
		{`{"eventName": "MODIFY", "d": {"k": "ENV#1", "new": {"x": "a"}, "n": 3}}`, false},                  // prefix
		{`{"eventName": "MODIFY", "d": {"k": "SPACE#1", "new": {}, "n": 3}}`, false},                        // exists true
		{`{"eventName": "MODIFY", "d": {"k": "SPACE#1", "new": {"x": 1}, "old": {"x": 1}, "n": 3}}`, false}, // exists false
		{`{"eventName": ["X", "MODIFY"], "d": {"k": "SPACE#1", "new": {"x": 1}, "n": 3}}`, true},            // array value
		{`{"eventName": "MODIFY", "d": {"k": "SPACE#1", "new": {"x": 1}, "n": 4}}`, false},                  // number
		{`{"eventName": "MODIFY", "d": {"k": "SPACE#1", "new": {"x": {"y": 1}}, "n": 3}}`, false},           // an object is not a leaf
	}
	for i, c := range cases {
		got, err := p.Match([]byte(c.event))
		if err != nil || got != c.want {
			t.Errorf("case %d: %v %v, want %v", i, got, err, c.want)
		}
	}
}

func TestCompileRefusesWhatItCannotHonour(t *testing.T) {
	for _, bad := range []string{
		`[]`, `{"a": "x"}`, `{"a": []}`, `{"a": [{"numeric": [">", 1]}]}`, `{"a": [{"exists": "yes"}]}`,
		`{"a": [{"prefix": 1}]}`, `{"a": [{"prefix": "x", "exists": true}]}`, `not json`,
	} {
		if _, err := Compile(bad); err == nil {
			t.Errorf("%s compiled", bad)
		}
	}
}
