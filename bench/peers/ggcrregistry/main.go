// Command ggcrregistry serves go-containerregistry's registry (pkg/registry) with its OCI 1.1 referrers API
// turned on, on a loopback address, blobs kept in a directory: the registry of the tests that check signatures
// are found through GET /v2/<name>/referrers/<digest> (the distribution registry answers that route 404).
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	address := flag.String("address", "127.0.0.1:0", "address to listen on")
	blobs := flag.String("blobs", "", "directory the blobs are stored in (memory when empty)")
	flag.Parse()
	opts := []registry.Option{registry.WithReferrersSupport(true), registry.Logger(log.New(os.Stderr, "", log.LstdFlags))}
	if *blobs != "" {
		opts = append(opts, registry.WithBlobHandler(registry.NewDiskBlobHandler(*blobs)))
	}
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("serving on %s\n", listener.Addr())
	server := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: registry.New(opts...)}
	log.Fatal(server.Serve(listener))
}
