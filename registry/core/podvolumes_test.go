package core

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A Pod's ephemeral volume creates the claim "<pod>-<volume>": its name
// must be valid, and no other volume may name it.
func TestEphemeralClaimNames(t *testing.T) {
	eph := corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}}
	vols := []corev1.Volume{
		{Name: "data", VolumeSource: eph},
		{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "Web-data"}}},
	}
	_, errs := validateVolumes(vols, podSpecOptions{podName: "Web"}, field.NewPath("spec", "volumes"))
	want := []string{
		`spec.volumes[0].name: Invalid value: "data": PVC name "Web-data": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		`spec.volumes[1].persistentVolumeClaim.claimName: Invalid value: "Web-data": must not reference a PVC that gets created for an ephemeral volume`,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors %v", errs)
	}
	for i, e := range errs {
		if e.Error() != want[i] {
			t.Errorf("error %d: %s\nwant %s", i, e.Error(), want[i])
		}
	}
	// A template has no name yet: nothing to check.
	if _, errs := validateVolumes(vols, podSpecOptions{}, field.NewPath("spec", "volumes")); len(errs) != 0 {
		t.Errorf("template errors %v", errs)
	}
}

// Volume sources as kube-apiserver 1.37 validates them: one accepted and
// some refused volumes per source, with the exact errors (hack/apidiff
// compares them with kube-apiserver's on random volumes).
func TestVolumeSources(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	dnsSub := `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
	claim := func(mut func(*corev1.PersistentVolumeClaimSpec)) corev1.VolumeSource {
		s := corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}
		if mut != nil {
			mut(&s)
		}
		return corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: s}}}
	}
	fieldRef := func(path string) *corev1.ObjectFieldSelector {
		return &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}
	}
	token := func(path string, exp int64) corev1.VolumeProjection {
		return corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: path, ExpirationSeconds: &exp}}
	}
	cases := []struct {
		name string
		src  corev1.VolumeSource
		want []string
	}{
		// downwardAPI: an item's errors name the source, not the item.
		{"downwardAPI ok", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: fieldRef("metadata.labels")},
			{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		}}}, nil},
		{"downwardAPI paths and fields", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: i32(01000), Items: []corev1.DownwardAPIVolumeFile{
			{Path: "../up", FieldRef: fieldRef("spec.nodeName")},
			{Path: "..x", FieldRef: fieldRef("metadata.labels['bad key!']"), Mode: i32(-1)},
			{Path: "/abs"},
		}}}, []string{
			`v.downwardAPI.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive`,
			`v.downwardAPI.path: Invalid value: "../up": must not contain '..'`,
			`v.downwardAPI.fieldRef.fieldPath: Unsupported value: "spec.nodeName": supported values: "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"`,
			`v.downwardAPI.path: Invalid value: "..x": must not start with '..'`,
			`v.downwardAPI.fieldRef: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`v.downwardAPI.mode: Invalid value: -1: must be a number between 0 and 0777 (octal), both inclusive`,
			`v.downwardAPI.path: Invalid value: "/abs": must be a relative path`,
			`v.downwardAPI: Required value: one of fieldRef and resourceFieldRef is required`,
		}},
		{"downwardAPI resources", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "a", ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}},
			{Path: "b", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "requests.memory", Divisor: resource.MustParse("2")}},
			{Path: "c", FieldRef: fieldRef("metadata.name"), ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu"}},
		}}}, []string{
			`v.downwardAPI.resourceFieldRef.containerName: Required value`,
			`v.downwardAPI.resourceFieldRef.divisor: Invalid value: "requests.memory": only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource`,
			`v.downwardAPI: Invalid value: "resource": fieldRef and resourceFieldRef can not be specified simultaneously`,
		}},
		// projected: token paths are reported on the volume; a path
		// written by two sources conflicts.
		{"projected ok", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			token("token", 3600),
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: fieldRef("metadata.namespace")}}}},
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: str("example.com/signer"), Path: "bundle.pem"}},
			{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/signer", KeyType: "ED25519", CredentialBundlePath: "creds.pem"}},
		}}}, nil},
		{"projected conflicts and tokens", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: i32(-1), Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: []corev1.KeyToPath{{Key: "ca", Path: "ca.crt"}}}},
			token("/token", 599),
			token("", 1<<32+1),
			{Secret: &corev1.SecretProjection{}, ConfigMap: &corev1.ConfigMapProjection{}},
		}}}, []string{
			`v.projected.defaultMode: Invalid value: -1: must be a number between 0 and 0777 (octal), both inclusive`,
			`v.projected: Invalid value: "cfg": conflicting duplicate paths`,
			`v.projected.sources[2].serviceAccountToken.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes`,
			`v.projected.path: Invalid value: "/token": must be a relative path`,
			`v.projected.sources[3].serviceAccountToken.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds`,
			`v.projected.path: Required value`,
			`v.projected.sources[4].secret.name: Required value`,
			`v.projected.sources[4].configMap.name: Required value`,
			`v.projected.sources[4]: Forbidden: may not specify more than 1 volume type per source`,
		}},
		{"projected trust bundles and certificates", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: str("a/b:c"), Path: "a.pem"}},
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: str("signer"), Path: "a.pem"}},
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: str("x"), SignerName: str("example.com/s"), Path: "b.pem"}},
			{PodCertificate: &corev1.PodCertificateProjection{SignerName: "kubernetes.io/x", KeyType: "RSA2048", MaxExpirationSeconds: i32(86401)}},
		}}}, []string{
			`v.projected.sources[0].clusterTrustBundle.name: Invalid value: "a/b:c": not a valid clustertrustbundlename: ClusterTrustBundle for signerName a/b must be named with prefix a:b:`,
			`v.projected.sources[1].clusterTrustBundle.signerName: Invalid value: "signer": must be a fully qualified domain and path of the form 'example.com/signer-name'`,
			`v.projected: Invalid value: "a.pem": conflicting duplicate paths`,
			`v.projected.sources[2].clusterTrustBundle: Invalid value: {"Name":"x","SignerName":"example.com/s","LabelSelector":null,"Optional":null,"Path":"b.pem","User":null}: only one of name and signerName may be used`,
			`v.projected.sources[3].podCertificate.keyType: Unsupported value: "RSA2048": supported values: "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"`,
			`v.projected.sources[3].podCertificate.maxExpirationSeconds: Invalid value: 86401: if provided, maxExpirationSeconds must be <= 86400`,
			`v.projected.sources[3].podCertificate: Required value: specify at least one of credentialBundlePath, keyPath, and certificateChainPath`,
		}},
		// emptyDir's mode (alpha) allows the sticky bit.
		{"emptyDir mode", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: i32(02000)}}, []string{
			`v.emptyDir.mode: Invalid value: 1024: must be a number between 0 and 01777 (octal), both inclusive`,
		}},
		{"csi ok", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "CSI.example.com"}}, nil},
		{"csi", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "bad_driver", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "Creds"}}}, []string{
			`v.csi.driver: Invalid value: "bad_driver": ` + dnsSub,
			`v.csi.name: Invalid value: "Creds": ` + dnsSub,
		}},
		// ephemeral: the claim template's metadata and spec, and the
		// claim's name "<pod>-<volume>".
		{"ephemeral ok", claim(nil), nil},
		{"ephemeral claim spec", claim(func(s *corev1.PersistentVolumeClaimSpec) {
			s.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce}
			s.Resources.Requests = nil
			s.VolumeMode = func() *corev1.PersistentVolumeMode { m := corev1.PersistentVolumeMode("Bogus"); return &m }()
			s.DataSource = &corev1.TypedLocalObjectReference{Kind: "VolumeSnapshot", Name: "snap"}
		}), []string{
			`v.ephemeral.volumeClaimTemplate.spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes`,
			`v.ephemeral.volumeClaimTemplate.spec.resources[storage]: Required value`,
			`v.ephemeral.volumeClaimTemplate.spec.volumeMode: Unsupported value: "Bogus": supported values: "Block", "Filesystem"`,
			`v.ephemeral.volumeClaimTemplate.spec.dataSource: Invalid value: "VolumeSnapshot": must be 'PersistentVolumeClaim' when referencing the default apiGroup`,
		}},
		{"ephemeral template metadata", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "claim", Labels: map[string]string{"app": "Bad Value!"}},
			Spec:       claim(nil).Ephemeral.VolumeClaimTemplate.Spec,
		}}}, []string{
			`v.ephemeral.volumeClaimTemplate.metadata.labels: Invalid value: "Bad Value!": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
			`v.ephemeral.volumeClaimTemplate.metadata.name: Forbidden: cannot be set`,
		}},
		{"ephemeral without template", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}, []string{
			`v.ephemeral.volumeClaimTemplate: Required value`,
		}},
		{"image ok", corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data:v1", PullPolicy: corev1.PullIfNotPresent}}, nil},
		{"image", corev1.VolumeSource{Image: &corev1.ImageVolumeSource{PullPolicy: "always"}}, []string{
			`v.image.reference: Required value`,
			`v.image.pullPolicy: Unsupported value: "always": supported values: "Always", "IfNotPresent", "Never"`,
		}},
		{"nfs ok", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/exports"}}, nil},
		{"nfs", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Path: "exports"}}, []string{
			`v.nfs.server: Required value`,
			`v.nfs.path: Invalid value: "exports": must be an absolute path`,
		}},
		{"gitRepo", corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{Directory: "../up"}}, []string{
			`v.gitRepo.repository: Required value`,
			`v.gitRepo.directory: Invalid value: "../up": must not contain '..'`,
		}},
		{"iscsi ok", corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1:3260", IQN: "iqn.2001-04.com.example:storage"}}, nil},
		{"iscsi", corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: strings.Repeat("t", 60), IQN: "eui.123", Lun: 256,
			SessionCHAPAuth: true, InitiatorName: str("bad")}}, []string{
			`v.iscsi.iqn: Invalid value: "eui.123": must be valid format`,
			`v.iscsi.lun: Invalid value: 256: must be between 0 and 255, inclusive`,
			`v.iscsi.secretRef: Required value`,
			`v.iscsi.initiatorname: Invalid value: "bad": must be valid format starting with iqn, eui, or naa`,
			`v.name: Invalid value: "data": Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if iscsi.initiatorName is specified.`,
		}},
		// The in-tree plugins.
		{"gcePersistentDisk", corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{Partition: 256}}, []string{
			`v.persistentDisk.pdName: Required value`,
			`v.persistentDisk.partition: Invalid value: 256: must be between 1 and 255, inclusive`,
		}},
		{"cephfs", corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{}}, []string{`v.cephfs.monitors: Required value`}},
		{"flexVolume", corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "example.com/lvm", Options: map[string]string{"foo.K8S.io/x": "y"}}}, []string{
			`v.flexVolume.options[foo.K8S.io/x]: Invalid value: "foo.K8S.io/x": kubernetes.io and k8s.io namespaces are reserved`,
		}},
		{"azureDisk", corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "http://x",
			Kind: func() *corev1.AzureDataDiskKind { k := corev1.AzureSharedBlobDisk; return &k }()}}, []string{
			`v.azureDisk.diskURI: Unsupported value: "http://x": supported values: "https://{account-name}.blob.core.windows.net/{container-name}/{disk-name}.vhd"`,
		}},
		{"quobyte", corev1.VolumeSource{Quobyte: &corev1.QuobyteVolumeSource{Registry: "a:1,b,c"}}, []string{
			`v.quobyte.registry: Invalid value: "a:1,b,c": must be a host:port pair or multiple pairs separated by commas`,
			`v.quobyte.registry: Invalid value: "a:1,b,c": must be a host:port pair or multiple pairs separated by commas`,
			`v.quobyte.volume: Required value`,
		}},
		{"flocker", corev1.VolumeSource{Flocker: &corev1.FlockerVolumeSource{DatasetName: "a/b", DatasetUUID: "u"}}, []string{
			`v.flocker: Invalid value: "resource": datasetName and datasetUUID can not be specified simultaneously`,
			`v.flocker.datasetName: Invalid value: "a/b": must not contain '/'`,
		}},
		{"fc", corev1.VolumeSource{FC: &corev1.FCVolumeSource{TargetWWNs: []string{"500a0982991b8dc5"}, Lun: i32(-1)}}, []string{
			`v.fc.lun: Invalid value: -1: must be between 0 and 255, inclusive`,
		}},
		{"storageos", corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{VolumeName: "Bad_Vol", SecretRef: &corev1.LocalObjectReference{}}}, []string{
			`v.storageos.volumeName: Invalid value: "Bad_Vol": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
			`v.storageos.secretRef.name: Required value`,
		}},
		{"secret owners", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultUser: i64(-1)}}, []string{
			`v.secret.defaultUser: Invalid value: -1: must be between 0 and 2147483647, inclusive`,
		}},
		{"two sources", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/p"}, Image: &corev1.ImageVolumeSource{Reference: "x", PullPolicy: corev1.PullAlways}}, []string{
			`v.image: Forbidden: may not specify more than 1 volume type`,
		}},
	}
	for _, c := range cases {
		errs := validateVolumeSource(&c.src, "data", field.NewPath("v"), podSpecOptions{podName: "web-0"})
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, strings.Join(got, "\n     "), strings.Join(c.want, "\n     "))
		}
	}
}

// Alpha fields are dropped from new objects and kept when the stored one
// uses them already.
func TestDropDisabledVolumeFields(t *testing.T) {
	mode, user := int32(0700), int64(1000)
	spec := func() *corev1.PodSpec {
		return &corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: &mode}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultUser: &user}}},
		}}
	}
	s := spec()
	dropDisabledVolumeFields(s, nil)
	if s.Volumes[0].EmptyDir.Mode != nil || s.Volumes[1].Secret.DefaultUser != nil {
		t.Errorf("create kept %+v", s.Volumes)
	}
	s = spec()
	dropDisabledVolumeFields(s, spec())
	if s.Volumes[0].EmptyDir.Mode == nil || s.Volumes[1].Secret.DefaultUser == nil {
		t.Errorf("update dropped %+v", s.Volumes)
	}
}
