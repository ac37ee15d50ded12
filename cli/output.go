package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

var outputs = []string{"table", "json", "yaml"}

// print writes v as -o asks: json and yaml are the API's own object (its
// JSON field names), table is rows of the columns head names.
func (a *app) print(w io.Writer, v any, head []string, rows func(add func(cols ...string))) error {
	switch a.output {
	case "json":
		raw, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", raw)
		return err
	case "yaml":
		raw, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(raw)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	rows(func(cols ...string) {
		for i, c := range cols {
			if c == "" {
				cols[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	})
	return tw.Flush()
}

// age is how long ago t was, as kubectl prints it (5s, 3m, 2h, 4d).
func age(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// labelsText is k=v,k2=v2 in key order.
func labelsText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
