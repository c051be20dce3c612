// Command ocrender prints the objects operator-controller's registry+v1
// renderer makes of a bundle directory, as one JSON array, for the reconciler's
// conversion-parity sweep. Its module path sits under operator-controller's, so
// that the renderer's internal packages may be imported; operator-controller
// itself is required at a pinned release like any other module.
//
//	ocrender render -bundle DIR -namespace NS [-watch NS]... [-cert-manager]
//	ocrender normalize < objects.json
//
// normalize reads a JSON array of objects and writes each back through the Go
// type the same scheme gives its kind (unknown kinds pass unchanged), so both
// converters' output is compared in one serialization: zero values and field
// order are the Go types', not either converter's.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/operator-framework/operator-controller/internal/operator-controller/rukpak/bundle/source"
	"github.com/operator-framework/operator-controller/internal/operator-controller/rukpak/render"
	"github.com/operator-framework/operator-controller/internal/operator-controller/rukpak/render/certproviders"
	"github.com/operator-framework/operator-controller/internal/operator-controller/rukpak/render/registryv1"
)

type repeated []string

func (r *repeated) String() string     { return fmt.Sprint(*r) }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

var types = runtime.NewScheme()

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, apiregistrationv1.AddToScheme,
	} {
		if err := add(types); err != nil {
			panic(err)
		}
	}
}

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: ocrender render|normalize ..."))
	}
	var out []json.RawMessage
	var err error
	switch os.Args[1] {
	case "render":
		out, err = renderBundle(os.Args[2:])
	case "normalize":
		out, err = normalizeStdin()
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	if out == nil {
		out = []json.RawMessage{}
	}
	data, err := json.Marshal(out)
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(append(data, '\n'))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(2)
}

func renderBundle(args []string) ([]json.RawMessage, error) {
	flags := flag.NewFlagSet("render", flag.ContinueOnError)
	dir := flags.String("bundle", "", "registry+v1 bundle directory (manifests/ and metadata/)")
	namespace := flags.String("namespace", "", "install namespace")
	certManager := flags.Bool("cert-manager", false, "use the cert-manager certificate provider")
	var watch repeated
	flags.Var(&watch, "watch", "target namespace (repeatable; '' is all namespaces; none: the bundle's default)")
	if err := flags.Parse(args); err != nil {
		return nil, err
	}
	bundle, err := source.FromFS(os.DirFS(*dir)).GetBundle()
	if err != nil {
		return nil, fmt.Errorf("reading bundle: %w", err)
	}
	opts := []render.Option{render.WithTargetNamespaces(watch...)}
	if *certManager {
		opts = append(opts, render.WithCertificateProvider(certproviders.CertManagerCertificateProvider{}))
	}
	objects, err := registryv1.Renderer.Render(bundle, *namespace, opts...)
	if err != nil {
		return nil, fmt.Errorf("rendering bundle: %w", err)
	}
	result := make([]json.RawMessage, 0, len(objects))
	for _, obj := range objects {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if raw, err = normalize(raw); err != nil {
			return nil, err
		}
		result = append(result, raw)
	}
	return result, nil
}

func normalizeStdin() ([]json.RawMessage, error) {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		return nil, err
	}
	var objects []json.RawMessage
	if err := json.Unmarshal(data, &objects); err != nil {
		return nil, fmt.Errorf("stdin is not a JSON array of objects: %w", err)
	}
	for i, raw := range objects {
		if objects[i], err = normalize(raw); err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
	}
	return objects, nil
}

// normalize writes one object back through its Go type, when the scheme has one.
func normalize(raw json.RawMessage) (json.RawMessage, error) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(meta.APIVersion)
	if err != nil {
		return raw, nil
	}
	typed, err := types.New(gv.WithKind(meta.Kind))
	if err != nil {
		return raw, nil
	}
	if err := json.Unmarshal(raw, typed); err != nil {
		return nil, fmt.Errorf("%s %s: %w", meta.APIVersion, meta.Kind, err)
	}
	return json.Marshal(typed)
}
