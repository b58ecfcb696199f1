package main

// --seed FILE: objects written straight into etcd before kube-apiserver
// starts, for benches that need hundreds of thousands of objects. Through
// the API each create costs ~5 ms of the apiserver's CPU (admission,
// field management, a raft round trip), so 300,000 objects took ~50 minutes
// on 2 cores. Here each object still goes the apiserver's own way into
// storage: decoded and defaulted by its scheme, prepared and validated by the
// kind's registry strategy (rest.BeforeCreate), then encoded as protobuf at the
// storage version under the key kube-apiserver uses, so it is served exactly
// as a created one would be. What the REST layer adds beyond the strategy
// (a Service's cluster IPs, managedFields) the caller writes into the objects
// itself, e.g. copied from one object created through the API.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/discovery/endpointslice"
	"k8s.io/kubernetes/pkg/registry/networking/ingress"
)

// seedKind is where kube-apiserver keeps one kind: its etcd key prefix
// (pkg/kubeapiserver's SpecialDefaultResourcePrefixes for Services and
// Ingresses), the storage version and the registry's create strategy.
type seedKind struct {
	prefix   string
	version  schema.GroupVersion
	strategy rest.RESTCreateStrategy
}

var seedKinds = map[schema.GroupVersionKind]seedKind{
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}: {
		"ingress", schema.GroupVersion{Group: "networking.k8s.io", Version: "v1"}, ingress.Strategy,
	},
	{Version: "v1", Kind: "Service"}: {
		"services/specs", schema.GroupVersion{Version: "v1"}, service.Strategy,
	},
	{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}: {
		"endpointslices", schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"}, endpointslice.Strategy,
	},
}

// seed writes every object of the JSON stream at path (objects one after
// another, e.g. one per line) and returns how many. Each is its own etcd
// transaction, so each gets a resourceVersion of its own as a created one
// does (the objects of one transaction would share its revision). An object
// whose key exists already is an error: seeding creates, never overwrites.
func seed(ctx context.Context, e *embed.Etcd, file string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	decoder := legacyscheme.Codecs.UniversalDecoder()
	encoder := protobuf.NewSerializer(legacyscheme.Scheme, legacyscheme.Scheme)
	for n := 0; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return n, nil
		} else if err != nil {
			return n, fmt.Errorf("object %d: %w", n+1, err)
		}
		key, value, err := storageForm(ctx, decoder, encoder, raw)
		if err != nil {
			return n, fmt.Errorf("object %d: %w", n+1, err)
		}
		resp, err := e.Server.Txn(ctx, &pb.TxnRequest{
			Compare: []*pb.Compare{{
				Key: key, Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
				TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0},
			}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{
				RequestPut: &pb.PutRequest{Key: key, Value: value},
			}}},
		})
		if err != nil {
			return n, fmt.Errorf("object %d: %w", n+1, err)
		}
		if !resp.Succeeded {
			return n, fmt.Errorf("object %d: %s exists already", n+1, key)
		}
	}
}

// storageForm is one object's etcd key and value, as kube-apiserver's create
// would write them.
func storageForm(ctx context.Context, decoder runtime.Decoder, encoder runtime.Encoder, raw []byte) ([]byte, []byte, error) {
	obj, gvk, err := decoder.Decode(raw, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	kind, ok := seedKinds[*gvk]
	if !ok {
		return nil, nil, fmt.Errorf("--seed does not know %s", gvk)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	rest.FillObjectMetaSystemFields(m)
	m.SetResourceVersion("") // etcd's revision is the resourceVersion
	ctx = genericapirequest.WithNamespace(ctx, m.GetNamespace())
	if err := rest.BeforeCreate(kind.strategy, ctx, obj); err != nil {
		return nil, nil, err
	}
	value, err := runtime.Encode(legacyscheme.Codecs.EncoderForVersion(encoder, kind.version), obj)
	if err != nil {
		return nil, nil, err
	}
	key := path.Join("/registry", kind.prefix, m.GetNamespace(), m.GetName())
	return []byte(key), value, nil
}
