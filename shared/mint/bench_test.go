package mint_test

import (
	"testing"

	"spaces/infra/minttest"
	"spaces/shared/space"
)

// BenchmarkMint compares a warm cache (one grant read in DynamoDB) with a
// cold mint (grant, account and the cloud round trips) against simcloud.
func BenchmarkMint(b *testing.B) {
	env := minttest.Start(b)
	for _, p := range space.Providers {
		b.Run(string(p), func(b *testing.B) {
			s := env.Register(b, p, "bench-"+string(p), false)
			cl := minttest.Cluster(p, "bench-"+string(p), "https://127.0.0.1:6443", nil)
			cl.CAPEM = env.Cloud.CAPEM
			cl.Backend = "bench"
			env.Cloud.AddCluster(cl)
			b.Run("warm", func(b *testing.B) {
				if _, err := env.Minter.Mint(b.Context(), s); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := env.Minter.Mint(b.Context(), s); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("cold", func(b *testing.B) {
				for b.Loop() {
					env.Minter.Invalidate(s.ID)
					if _, err := env.Minter.Mint(b.Context(), s); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
