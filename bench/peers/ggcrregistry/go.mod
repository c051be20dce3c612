// go-containerregistry's registry with the referrers API on, behind a small main of ours (main.go).
// Built by bench/peers/ggcrregistry.py through reconciler.localcluster.gobuild; cached outside the source tree.
module reconciler.local/peers/ggcrregistry

go 1.26.0

require github.com/google/go-containerregistry v0.22.1
