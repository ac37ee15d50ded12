package dynamostore

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"spaces/shared/space"
)

// FuzzRevisionManifests: manifests the domain accepts always encode as a
// DynamoDB item (an encoding error was a 500) and read back exactly as
// pushed, numbers included.
func FuzzRevisionManifests(f *testing.F) {
	for _, s := range []string{
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"":"x"}}]`,
		`[{"apiVersion":"v1","kind":"W","metadata":{"name":"a"},"spec":{"n":9007199254740993,"m":-1.5e-120,"z":0,"l":[true,null,"",{}]}}]`,
		`[{"apiVersion":"v1","kind":"W","metadata":{"name":"a"},"spec":{"e":[],"o":{"a":{"b":[[]]}}}}]`,
	} {
		f.Add([]byte(s))
	}
	enc := attributevalue.NewEncoder(func(o *attributevalue.EncoderOptions) { o.TagKey = "json" })
	f.Fuzz(func(t *testing.T, doc []byte) {
		var manifests []map[string]any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if dec.Decode(&manifests) != nil || space.CheckManifests(manifests) != nil {
			return
		}
		want, err := json.Marshal(manifests)
		if err != nil {
			t.Fatal(err)
		}
		av, err := enc.Encode(space.Revision{Manifests: manifests})
		if err != nil {
			t.Fatalf("accepted manifests do not encode: %v", err)
		}
		var back space.Revision
		if err := revisionDecoder.Decode(av, &back); err != nil {
			t.Fatalf("decode: %v", err)
		}
		for _, m := range back.Manifests {
			exactNumbers(m)
		}
		got, err := json.Marshal(back.Manifests)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round trip changed the manifests:\n got %s\nwant %s", got, want)
		}
	})
}
