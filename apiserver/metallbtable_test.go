package apiserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	metallbv1beta1 "github.com/svcnet/svcnet/apis/metallb/v1beta1"
	metallbv1beta2 "github.com/svcnet/svcnet/apis/metallb/v1beta2"
	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
	metallbreg "github.com/svcnet/svcnet/registry/metallb"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// getTable GETs path as kubectl get does and decodes the Table.
func getTable(t *testing.T, srv *apiservertest.Server, path string) metav1.Table {
	t.Helper()
	hc := rawClient(t, srv.Config, true)
	req, _ := http.NewRequest("GET", srv.Config.Host+path, nil)
	req.Header.Set("Accept", tableAccept)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s as Table: %d %s", path, resp.StatusCode, body)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	if tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" {
		t.Errorf("GET %s: %s %s", path, tbl.APIVersion, tbl.Kind)
	}
	return tbl
}

type col struct {
	name, typ, path string
	priority        int32
	desc            string // empty: kube-apiserver's description of a CRD column
}

// checkColumns compares the table's columns with Name and cols, described
// as kube-apiserver describes CRD columns without a description.
func checkColumns(t *testing.T, what string, tbl metav1.Table, cols []col) {
	t.Helper()
	want := []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}}
	for _, c := range cols {
		d := c.desc
		if d == "" {
			d = "Custom resource definition column (in JSONPath format): " + c.path
		}
		want = append(want, metav1.TableColumnDefinition{Name: c.name, Type: c.typ, Description: d, Priority: c.priority})
	}
	if !reflect.DeepEqual(tbl.ColumnDefinitions, want) {
		t.Errorf("%s columns:\n got %+v\nwant %+v", what, tbl.ColumnDefinitions, want)
	}
}

// rowCells returns the cells of the row named name.
func rowCells(t *testing.T, what string, tbl metav1.Table, name string) []any {
	t.Helper()
	for _, r := range tbl.Rows {
		if len(r.Cells) > 0 && r.Cells[0] == name {
			return r.Cells
		}
	}
	t.Fatalf("%s: no row %q in %+v", what, name, tbl.Rows)
	return nil
}

func checkCells(t *testing.T, what string, got, want []any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s cells:\n got %#v\nwant %#v", what, got, want)
	}
}

var ageCell = regexp.MustCompile(`^\d+s$`)

// TestMetalLBTables: kubectl get on the MetalLB kinds shows their CRDs'
// additionalPrinterColumns (MetalLB v0.16.2), evaluated as kube-apiserver's
// CRD table convertor does; Community, without any, shows Name and Age.
func TestMetalLBTables(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	dc := dynamic.NewForConfigOrDie(srv.Config)
	const ns = "metallb-system"
	if _, err := kubernetes.NewForConfigOrDie(srv.Config).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(gvr schema.GroupVersionResource, y string) *unstructured.Unstructured {
		t.Helper()
		o, err := dc.Resource(gvr).Namespace(ns).Create(ctx, obj(t, y), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", gvr.Resource, err)
		}
		return o
	}
	base := "/apis/metallb.io/v1beta1/namespaces/" + ns + "/"

	// IPAddressPool: the defaults show (the cluster's `first-pool   true
	// false   ["192.168.10.0/24"]`).
	create(metallbv1beta1.IPAddressPoolsResource, "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: first-pool}\nspec: {addresses: [192.168.10.0/24]}")
	create(metallbv1beta1.IPAddressPoolsResource, "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: second}\nspec: {addresses: [10.0.0.1-10.0.0.5, 'fc00::/120'], autoAssign: false, avoidBuggyIPs: true}")
	poolCols := []col{{"Auto Assign", "boolean", ".spec.autoAssign", 0, ""}, {"Avoid Buggy IPs", "boolean", ".spec.avoidBuggyIPs", 0, ""}, {"Addresses", "string", ".spec.addresses", 0, ""}}
	tbl := getTable(t, srv, base+"ipaddresspools")
	checkColumns(t, "ipaddresspools", tbl, poolCols)
	if len(tbl.Rows) != 2 {
		t.Errorf("ipaddresspools: %d rows", len(tbl.Rows))
	}
	checkCells(t, "first-pool", rowCells(t, "ipaddresspools", tbl, "first-pool"), []any{"first-pool", true, false, `["192.168.10.0/24"]`})
	checkCells(t, "second", rowCells(t, "ipaddresspools", tbl, "second"), []any{"second", false, true, `["10.0.0.1-10.0.0.5","fc00::/120"]`})
	if tbl.Rows[0].Object.Raw == nil || !regexp.MustCompile(`"kind":"PartialObjectMetadata"`).Match(tbl.Rows[0].Object.Raw) {
		t.Errorf("ipaddresspools row object: %s", tbl.Rows[0].Object.Raw)
	}
	one := getTable(t, srv, base+"ipaddresspools/first-pool")
	checkColumns(t, "ipaddresspools/first-pool", one, poolCols)
	if len(one.Rows) != 1 {
		t.Fatalf("ipaddresspools/first-pool: %d rows", len(one.Rows))
	}
	checkCells(t, "get first-pool", one.Rows[0].Cells, []any{"first-pool", true, false, `["192.168.10.0/24"]`})

	// BGPPeer: the same columns in both versions; a missing field is a
	// nil cell, numbers and booleans in string columns are printed.
	create(metallbv1beta2.BGPPeersResource, "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: peer}\nspec: {myASN: 64512, peerASN: 64500, peerAddress: 172.18.0.1, ebgpMultiHop: true}")
	peerCols := []col{{"Address", "string", ".spec.peerAddress", 0, ""}, {"ASN", "string", ".spec.peerASN", 0, ""}, {"BFD Profile", "string", ".spec.bfdProfile", 0, ""}, {"Multi Hops", "string", ".spec.ebgpMultiHop", 0, ""}}
	for _, path := range []string{"/apis/metallb.io/v1beta2/namespaces/" + ns + "/bgppeers", base + "bgppeers"} {
		tbl := getTable(t, srv, path)
		checkColumns(t, path, tbl, peerCols)
		checkCells(t, path, rowCells(t, path, tbl, "peer"), []any{"peer", "172.18.0.1", "64500", nil, "true"})
	}

	// BFDProfile: boolean and integer columns.
	create(metallbv1beta1.BFDProfilesResource, "apiVersion: metallb.io/v1beta1\nkind: BFDProfile\nmetadata: {name: fast}\nspec: {passiveMode: true, transmitInterval: 300, detectMultiplier: 3}")
	tbl = getTable(t, srv, base+"bfdprofiles")
	checkColumns(t, "bfdprofiles", tbl, []col{{"Passive Mode", "boolean", ".spec.passiveMode", 0, ""}, {"Transmit Interval", "integer", ".spec.transmitInterval", 0, ""}, {"Receive Interval", "integer", ".spec.receiveInterval", 0, ""}, {"Multiplier", "integer", ".spec.detectMultiplier", 0, ""}})
	checkCells(t, "bfdprofiles", rowCells(t, "bfdprofiles", tbl, "fast"), []any{"fast", true, float64(300), nil, float64(3)})

	// ConfigurationState: status columns and a date column, served as the
	// time since it.
	cs := create(metallbv1beta1.ConfigurationStatesResource, "apiVersion: metallb.io/v1beta1\nkind: ConfigurationState\nmetadata: {name: controller}")
	tbl = getTable(t, srv, base+"configurationstates")
	csCols := []col{{"Result", "string", ".status.result", 0, ""}, {"ErrorSummary", "string", ".status.errorSummary", 0, ""}, {"Age", "date", ".metadata.creationTimestamp", 0, ""}}
	checkColumns(t, "configurationstates", tbl, csCols)
	cells := rowCells(t, "configurationstates", tbl, "controller")
	if len(cells) != 4 || cells[1] != nil || cells[2] != nil {
		t.Errorf("configurationstates without status: %#v", cells)
	} else if s, _ := cells[3].(string); !ageCell.MatchString(s) {
		t.Errorf("configurationstates Age = %#v, want a duration", cells[3])
	}
	if err := unstructured.SetNestedMap(cs.Object, map[string]any{"result": "Valid", "errorSummary": "no errors"}, "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(metallbv1beta1.ConfigurationStatesResource).Namespace(ns).UpdateStatus(ctx, cs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cells = rowCells(t, "configurationstates", getTable(t, srv, base+"configurationstates"), "controller")
	if len(cells) != 4 || cells[1] != "Valid" || cells[2] != "no errors" {
		t.Errorf("configurationstates with status: %#v", cells)
	}

	// ServiceL2Status: the status the speaker writes.
	l2 := create(metallbv1beta1.ServiceL2StatusesResource, "apiVersion: metallb.io/v1beta1\nkind: ServiceL2Status\nmetadata: {name: l2-web}")
	if err := unstructured.SetNestedMap(l2.Object, map[string]any{"node": "n1", "serviceName": "web", "serviceNamespace": "default"}, "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(metallbv1beta1.ServiceL2StatusesResource).Namespace(ns).UpdateStatus(ctx, l2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	tbl = getTable(t, srv, base+"servicel2statuses")
	checkColumns(t, "servicel2statuses", tbl, []col{{"Allocated Node", "string", ".status.node", 0, ""}, {"Service Name", "string", ".status.serviceName", 0, ""}, {"Service Namespace", "string", ".status.serviceNamespace", 0, ""}})
	checkCells(t, "servicel2statuses", rowCells(t, "servicel2statuses", tbl, "l2-web"), []any{"l2-web", "n1", "web", "default"})

	// L2Advertisement: Node Selectors is a wide column (priority 10).
	create(metallbv1beta1.L2AdvertisementsResource, "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l2}\nspec: {ipAddressPools: [first-pool], nodeSelectors: [{matchLabels: {rack: a}}]}")
	tbl = getTable(t, srv, base+"l2advertisements")
	checkColumns(t, "l2advertisements", tbl, []col{{"IPAddressPools", "string", ".spec.ipAddressPools", 0, ""}, {"IPAddressPool Selectors", "string", ".spec.ipAddressPoolSelectors", 0, ""}, {"Interfaces", "string", ".spec.interfaces", 0, ""}, {"Node Selectors", "string", ".spec.nodeSelectors", 10, ""}})
	checkCells(t, "l2advertisements", rowCells(t, "l2advertisements", tbl, "l2"), []any{"l2", `["first-pool"]`, nil, nil, `[{"matchLabels":{"rack":"a"}}]`})

	// Community: no additionalPrinterColumns, kube-apiserver's default for
	// CRDs (Name, Age), not the built-in resources' Created At.
	create(metallbv1beta1.CommunitiesResource, "apiVersion: metallb.io/v1beta1\nkind: Community\nmetadata: {name: communities}\nspec: {communities: [{name: vpn, value: '65535:65282'}]}")
	tbl = getTable(t, srv, base+"communities")
	checkColumns(t, "communities", tbl, []col{{"Age", "date", ".metadata.creationTimestamp", 0, metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}})
	if cells := rowCells(t, "communities", tbl, "communities"); len(cells) != 2 || !ageCell.MatchString(cells[1].(string)) {
		t.Errorf("communities cells: %#v", cells)
	}
}

// TestMetalLBPoolDefaults: an IPAddressPool reads back with its CRD's
// defaults (autoAssign true, avoidBuggyIPs false) whether written before
// the defaults were applied (the defaults are applied on read, as
// kube-apiserver does for stored custom resources) or after.
func TestMetalLBPoolDefaults(t *testing.T) {
	dir := t.TempDir()
	const ns = "default"
	// A server that stores pools without the defaults (an older svcnet).
	old := apiservertest.Start(t, apiservertest.WithDataDir(dir), apiservertest.WithConfig(func(c *apiserver.Config) {
		c.Strategies = map[schema.GroupResource]registry.Strategy{
			metallbv1beta1.IPAddressPoolsResource.GroupResource(): &metallbreg.PoolStrategy{Strategy: &metallbreg.Strategy{Basic: core.Basic{Namespaced: true}}},
		}
	}))
	ctx := ctxT(t)
	pools := dynamic.NewForConfigOrDie(old.Config).Resource(metallbv1beta1.IPAddressPoolsResource).Namespace(ns)
	o, err := pools.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: stored}\nspec: {addresses: [192.168.10.0/24]}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "autoAssign"); found {
		t.Fatalf("the old server defaulted: %v", o.Object["spec"])
	}
	old.Stop()

	srv := apiservertest.Start(t, apiservertest.WithDataDir(dir))
	pools = dynamic.NewForConfigOrDie(srv.Config).Resource(metallbv1beta1.IPAddressPoolsResource).Namespace(ns)
	wantSpec := func(what string, o *unstructured.Unstructured, autoAssign, avoid bool) {
		t.Helper()
		a, foundA, _ := unstructured.NestedBool(o.Object, "spec", "autoAssign")
		b, foundB, _ := unstructured.NestedBool(o.Object, "spec", "avoidBuggyIPs")
		if !foundA || !foundB || a != autoAssign || b != avoid {
			t.Errorf("%s: spec %v, want autoAssign %v, avoidBuggyIPs %v", what, o.Object["spec"], autoAssign, avoid)
		}
	}
	got, err := pools.Get(ctx, "stored", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSpec("stored before the defaults, get", got, true, false)
	l, err := pools.List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %v %v", l, err)
	}
	wantSpec("stored before the defaults, list", &l.Items[0], true, false)

	o, err = pools.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: created}\nspec: {addresses: [192.168.11.0/24]}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSpec("create response", o, true, false)
	got, err = pools.Get(ctx, "created", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSpec("created, get", got, true, false)

	// Explicit values are kept; an update that drops them gets the
	// defaults again.
	o, err = pools.Create(ctx, obj(t, "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: manual}\nspec: {addresses: [192.168.12.0/24], autoAssign: false, avoidBuggyIPs: true}"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSpec("explicit", o, false, true)
	unstructured.RemoveNestedField(o.Object, "spec", "autoAssign")
	unstructured.RemoveNestedField(o.Object, "spec", "avoidBuggyIPs")
	o, err = pools.Update(ctx, o, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSpec("updated without them", o, true, false)
}
