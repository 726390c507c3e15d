package main

import (
	"math/rand"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volume sources as users write them, right and wrong: every source
// kube-apiserver validates (downwardAPI, projected with each projection,
// emptyDir, csi, ephemeral, image, nfs, gitRepo, iscsi and the other in-tree
// plugins), with typos, empty required fields, out-of-range numbers,
// absolute and ".." paths, paths written twice in one projected volume, two
// sources in one volume, and the file owners and emptyDir modes of alpha
// features (dropped on create, kept when the stored object has them).

// volumeFamilies each add a volume of some sources to a pod spec.
var volumeFamilies = []func(r *rand.Rand) corev1.VolumeSource{
	randDownwardAPIVolume,
	randProjectedVolume,
	randProjectedVolume,
	randModernVolume,
	randInTreeVolume,
	randInTreeVolume,
}

// addVolumes adds one or two volumes (sometimes mounted) to a pod spec.
func addVolumes(r *rand.Rand, s *corev1.PodSpec) {
	for i, n := 0, 1+r.Intn(2); i < n; i++ {
		v := corev1.Volume{
			Name:         pick(r, "vol", "vol", "files", "certs", "Bad_Vol", "", "data", strings.Repeat("v", 58)),
			VolumeSource: volumeFamilies[r.Intn(len(volumeFamilies))](r),
		}
		if maybe(r, 0.1) {
			// A second source in the same volume.
			second := volumeFamilies[r.Intn(len(volumeFamilies))](r)
			mergeSources(&v.VolumeSource, &second)
		}
		s.Volumes = append(s.Volumes, v)
		if len(s.Containers) > 0 && maybe(r, 0.4) {
			s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{
				Name: v.Name, MountPath: pick(r, "/mnt/"+v.Name, "/etc/files", "/data"), ReadOnly: maybe(r, 0.5),
				SubPath: pick(r, "", "", "sub", "../up")})
		}
	}
	if maybe(r, 0.5) {
		// Projected tokens need a service account.
		s.ServiceAccountName = pick(r, "builder", "default")
	}
}

// mergeSources sets in dst the sources of src that dst does not have.
func mergeSources(dst, src *corev1.VolumeSource) {
	if dst.EmptyDir == nil {
		dst.EmptyDir = src.EmptyDir
	}
	if dst.NFS == nil {
		dst.NFS = src.NFS
	}
	if dst.ISCSI == nil {
		dst.ISCSI = src.ISCSI
	}
	if dst.DownwardAPI == nil {
		dst.DownwardAPI = src.DownwardAPI
	}
	if dst.Projected == nil {
		dst.Projected = src.Projected
	}
	if dst.CSI == nil {
		dst.CSI = src.CSI
	}
	if dst.Image == nil {
		dst.Image = src.Image
	}
	if dst.GitRepo == nil {
		dst.GitRepo = src.GitRepo
	}
	if dst.Ephemeral == nil {
		dst.Ephemeral = src.Ephemeral
	}
}

var volumePaths = []string{"labels", "annotations", "a/b", "", "/abs", "../up", "..x", "a/../b", "dir/name", "labels", ".", "a/..", "..", "../"}

func randMode(r *rand.Rand) *int32 {
	return pick(r, nil, nil, ptr[int32](0644), ptr[int32](0400), ptr[int32](0777), ptr[int32](01000), ptr[int32](-1), ptr[int32](0))
}

func randUser(r *rand.Rand) *int64 {
	if maybe(r, 0.8) {
		return nil
	}
	return pick(r, ptr[int64](1000), ptr[int64](0), ptr[int64](-1), ptr[int64](1<<31))
}

func randFieldRef(r *rand.Rand) *corev1.ObjectFieldSelector {
	return &corev1.ObjectFieldSelector{
		APIVersion: pick(r, "", "", "v1", "v2"),
		FieldPath: pick(r, "metadata.labels", "metadata.annotations", "metadata.name", "metadata.namespace", "metadata.uid",
			"spec.nodeName", "status.podIP", "spec.serviceAccountName", "metadata.labels['app']", "metadata.annotations['Example.com/A']",
			"metadata.labels['bad key!']", "spec.host", "", "metadata.labels['']", "metadata.name['x']", "bogus", "['x']"),
	}
}

func randResourceFieldRef(r *rand.Rand) *corev1.ResourceFieldSelector {
	return &corev1.ResourceFieldSelector{
		ContainerName: pick(r, "app", "app", "", "missing"),
		Resource:      pick(r, "limits.cpu", "requests.memory", "limits.hugepages-2Mi", "", "bogus", "limits.ephemeral-storage", "cpu"),
		Divisor:       resource.MustParse(pick(r, "0", "0", "1m", "1", "1Mi", "2", "1k", "500m")),
	}
}

func randDownwardFiles(r *rand.Rand) []corev1.DownwardAPIVolumeFile {
	var files []corev1.DownwardAPIVolumeFile
	for i, n := 0, r.Intn(3); i < n; i++ {
		f := corev1.DownwardAPIVolumeFile{Path: pick(r, volumePaths...), Mode: pick(r, nil, nil, nil, ptr[int32](0600), ptr[int32](01000), ptr[int32](-1)), User: randUser(r)}
		switch r.Intn(6) {
		case 0, 1, 2:
			f.FieldRef = randFieldRef(r)
		case 3, 4:
			f.ResourceFieldRef = randResourceFieldRef(r)
		case 5:
			if maybe(r, 0.5) {
				f.FieldRef, f.ResourceFieldRef = randFieldRef(r), randResourceFieldRef(r)
			}
		}
		files = append(files, f)
	}
	return files
}

func randDownwardAPIVolume(r *rand.Rand) corev1.VolumeSource {
	return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: randDownwardFiles(r), DefaultMode: randMode(r), DefaultUser: randUser(r)}}
}

func randKeyToPaths(r *rand.Rand) []corev1.KeyToPath {
	var items []corev1.KeyToPath
	for i, n := 0, r.Intn(3); i < n; i++ {
		items = append(items, corev1.KeyToPath{Key: pick(r, "ca.crt", "tls.key", "", "config"), Path: pick(r, volumePaths...),
			Mode: pick(r, nil, nil, ptr[int32](0600), ptr[int32](800)), User: randUser(r)})
	}
	return items
}

func randProjection(r *rand.Rand) corev1.VolumeProjection {
	var p corev1.VolumeProjection
	switch r.Intn(9) {
	case 0:
		p.Secret = &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: pick(r, "tls", "tls", "")}, Items: randKeyToPaths(r)}
	case 1:
		p.ConfigMap = &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: pick(r, "cfg", "cfg", "")}, Items: randKeyToPaths(r)}
	case 2:
		p.DownwardAPI = &corev1.DownwardAPIProjection{Items: randDownwardFiles(r)}
	case 3, 4:
		p.ServiceAccountToken = &corev1.ServiceAccountTokenProjection{
			Audience:          pick(r, "", "vault", "https://kubernetes.default.svc"),
			ExpirationSeconds: pick(r, nil, nil, ptr[int64](3600), ptr[int64](599), ptr[int64](600), ptr[int64](1<<32+1), ptr[int64](1<<32), ptr[int64](-1)),
			Path:              pick(r, "token", "token", "", "/abs", "../token", "..token", "a/../token"),
			User:              randUser(r),
		}
	case 5:
		b := &corev1.ClusterTrustBundleProjection{
			Path:     pick(r, "ca.pem", "ca.pem", "", "/abs", "labels", "../ca"),
			Optional: pick(r, nil, ptr(true)),
			User:     randUser(r),
		}
		switch r.Intn(5) {
		case 0:
			b.Name = ptr(pick(r, "bundle", "", "example.com:signer:bundle", "example.com/x:y", ":abc", "Bad_Name", "a:b:Bad_Name"))
		case 1:
			b.SignerName = ptr(pick(r, "example.com/signer", "", "bad", "a/b/c", "example.com/Bad_Path", "foo/bar", "Bad_Domain.com/x", "example.com/a.b"))
		case 2:
			b.Name, b.SignerName = ptr("bundle"), ptr("example.com/signer")
		case 3:
		}
		if maybe(r, 0.4) {
			b.LabelSelector = pick(r, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				&metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}},
				&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Equals"}}})
		}
		p.ClusterTrustBundle = b
	case 6:
		c := &corev1.PodCertificateProjection{
			SignerName:           pick(r, "example.com/signer", "example.com/signer", "", "kubernetes.io/kube-apiserver-client-pod", "bad"),
			KeyType:              pick(r, "ED25519", "ECDSAP256", "RSA2048", ""),
			MaxExpirationSeconds: pick(r, nil, nil, ptr[int32](3600), ptr[int32](100), ptr[int32](86400), ptr[int32](86401), ptr[int32](91*86400+1)),
			CredentialBundlePath: pick(r, "", "creds.pem", "creds.pem", "/abs", "labels"),
			KeyPath:              pick(r, "", "", "key.pem", "creds.pem"),
			CertificateChainPath: pick(r, "", "", "chain.pem", "../chain"),
			User:                 randUser(r),
		}
		if maybe(r, 0.3) {
			c.UserAnnotations = pick(r, map[string]string{"example.com/a": "x"}, map[string]string{"bad": "x"}, map[string]string{"": "x"},
				map[string]string{"Example.com/B": "y"}, map[string]string{})
		}
		p.PodCertificate = c
	case 7:
		// Two projections in one source.
		p.Secret = &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}
		p.ConfigMap = &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}
	case 8:
		// None.
	}
	return p
}

func randProjectedVolume(r *rand.Rand) corev1.VolumeSource {
	pv := &corev1.ProjectedVolumeSource{DefaultMode: randMode(r), DefaultUser: randUser(r)}
	for i, n := 0, r.Intn(4); i < n; i++ {
		pv.Sources = append(pv.Sources, randProjection(r))
	}
	return corev1.VolumeSource{Projected: pv}
}

// randModernVolume: emptyDir (with its alpha mode), csi, ephemeral, image.
func randModernVolume(r *rand.Rand) corev1.VolumeSource {
	var v corev1.VolumeSource
	switch r.Intn(5) {
	case 0:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{
			Medium:    pick[corev1.StorageMedium](r, "", corev1.StorageMediumMemory),
			SizeLimit: pick(r, nil, ptr(resource.MustParse("1Gi")), ptr(resource.MustParse("-1"))),
			Mode:      pick(r, nil, ptr[int32](0755), ptr[int32](01777), ptr[int32](02000), ptr[int32](-1)),
		}
	case 1:
		c := &corev1.CSIVolumeSource{
			Driver:   pick(r, "csi.example.com", "csi.example.com", "", "Bad_Driver", "CSI.Example.com", strings.Repeat("d", 64)),
			ReadOnly: pick(r, nil, ptr(true)),
		}
		if maybe(r, 0.4) {
			c.NodePublishSecretRef = &corev1.LocalObjectReference{Name: pick(r, "creds", "", "Bad_Name")}
		}
		if maybe(r, 0.3) {
			c.VolumeAttributes = map[string]string{"size": "1Gi"}
		}
		v.CSI = c
	case 2, 3:
		v.Ephemeral = randEphemeral(r)
	case 4:
		v.Image = &corev1.ImageVolumeSource{
			Reference:  pick(r, "registry.example/data:v1", "registry.example/data:v1", "", "busybox", "nginx:latest"),
			PullPolicy: pick[corev1.PullPolicy](r, "", "", corev1.PullAlways, corev1.PullNever, "Bogus", "always"),
		}
	}
	return v
}

func randEphemeral(r *rand.Rand) *corev1.EphemeralVolumeSource {
	if maybe(r, 0.1) {
		return &corev1.EphemeralVolumeSource{}
	}
	t := &corev1.PersistentVolumeClaimTemplate{
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: pick(r, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				nil, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce}, []corev1.PersistentVolumeAccessMode{"ReadWrite"},
				[]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany}),
		},
	}
	if size := pick(r, "1Gi", "1Gi", "", "0", "-1Gi", "1.5Gi", "100m"); size != "" {
		t.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
	}
	if maybe(r, 0.2) {
		t.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(pick(r, "2Gi", "2.5Gi"))}
	}
	if maybe(r, 0.3) {
		t.Spec.StorageClassName = ptr(pick(r, "fast", "", "Bad_Class"))
	}
	if maybe(r, 0.2) {
		t.Spec.VolumeMode = ptr(pick[corev1.PersistentVolumeMode](r, corev1.PersistentVolumeBlock, "Bogus"))
	}
	if maybe(r, 0.2) {
		t.Spec.VolumeAttributesClassName = ptr(pick(r, "gold", "", "Bad_Class"))
	}
	if maybe(r, 0.2) {
		t.Spec.Selector = pick(r, &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "ssd"}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}})
	}
	switch r.Intn(6) {
	case 0:
		t.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: pick(r, "PersistentVolumeClaim", "VolumeSnapshot", ""), Name: pick(r, "src", "")}
		if maybe(r, 0.5) {
			t.Spec.DataSource.APIGroup = ptr(pick(r, "snapshot.storage.k8s.io", "", "Bad_Group"))
		}
	case 1:
		t.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: pick(r, "PersistentVolumeClaim", "VolumeSnapshot"), Name: pick(r, "src", ""),
			APIGroup: pick(r, nil, ptr("snapshot.storage.k8s.io")), Namespace: pick(r, nil, ptr("other"), ptr("Bad_NS"), ptr(""))}
		if maybe(r, 0.5) {
			t.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: t.Spec.DataSourceRef.Kind, Name: pick(r, t.Spec.DataSourceRef.Name, "else"),
				APIGroup: t.Spec.DataSourceRef.APIGroup}
		}
	}
	switch r.Intn(6) {
	case 0:
		t.Labels = map[string]string{pick(r, "app", "bad key!"): pick(r, "web", "Bad Value!")}
	case 1:
		t.Annotations = map[string]string{pick(r, "note", "bad key!"): "x"}
	case 2:
		t.Name = "claim"
	case 3:
		t.Finalizers = []string{"example.com/keep"}
		t.Namespace = "other"
	}
	return &corev1.EphemeralVolumeSource{VolumeClaimTemplate: t}
}

// randInTreeVolume: the in-tree plugins (most of them deprecated or
// removed from kubelet, all still validated), and secret and configMap
// volumes with file owners.
func randInTreeVolume(r *rand.Rand) corev1.VolumeSource {
	var v corev1.VolumeSource
	switch r.Intn(26) {
	case 0, 1:
		v.NFS = &corev1.NFSVolumeSource{Server: pick(r, "nfs.example.com", "nfs.example.com", ""), Path: pick(r, "/exports", "/exports", "", "exports", "/a/../b")}
	case 2, 3:
		v.GitRepo = &corev1.GitRepoVolumeSource{Repository: pick(r, "https://git.example.com/r.git", ""), Directory: pick(r, "", ".", "/abs", "../up", "sub", "a/../b"),
			Revision: pick(r, "", "main")}
	case 4, 5, 6:
		i := &corev1.ISCSIVolumeSource{
			TargetPortal: pick(r, "10.0.0.1:3260", "10.0.0.1:3260", "", "storage-target-portal.example.com:3260", strings.Repeat("t", 60)),
			IQN: pick(r, "iqn.2001-04.com.example:storage", "iqn.2001-04.com.example:storage", "", "bad", "iqn.bad", "eui.0123456789ABCDEF",
				"eui.123", "naa.0123456789abcdef0123456789abcdef", "naa.1"),
			Lun:               pick[int32](r, 0, 0, 255, 256, -1),
			DiscoveryCHAPAuth: maybe(r, 0.2),
			SessionCHAPAuth:   maybe(r, 0.2),
		}
		if maybe(r, 0.3) {
			i.SecretRef = &corev1.LocalObjectReference{Name: "chap"}
		}
		if maybe(r, 0.4) {
			i.InitiatorName = ptr(pick(r, "iqn.2001-04.com.example:init", "bad", "eui.123", "iqn.x", "naa.0123456789abcdef0123456789abcdef"))
		}
		v.ISCSI = i
	case 7:
		v.RBD = &corev1.RBDVolumeSource{CephMonitors: pick(r, []string{"10.0.0.1:6789"}, nil), RBDImage: pick(r, "img", "")}
	case 8:
		v.CephFS = &corev1.CephFSVolumeSource{Monitors: pick(r, []string{"10.0.0.1:6789"}, nil), Path: pick(r, "", "/")}
	case 9:
		v.Cinder = &corev1.CinderVolumeSource{VolumeID: pick(r, "vol-1", ""), SecretRef: pick(r, nil, &corev1.LocalObjectReference{}, &corev1.LocalObjectReference{Name: "s"})}
	case 10:
		fc := &corev1.FCVolumeSource{Lun: pick(r, nil, ptr[int32](0), ptr[int32](256), ptr[int32](-1))}
		if maybe(r, 0.6) {
			fc.TargetWWNs = []string{"500a0982991b8dc5"}
		}
		if maybe(r, 0.4) {
			fc.WWIDs = []string{"3600508b400105e210000900000490000"}
		}
		v.FC = fc
	case 11:
		v.FlexVolume = &corev1.FlexVolumeSource{Driver: pick(r, "example.com/lvm", ""),
			Options: pick(r, nil, map[string]string{"size": "1Gi"}, map[string]string{"kubernetes.io/x": "y"}, map[string]string{"foo.k8s.io/bar": "z", "a": "b"},
				map[string]string{"K8S.IO": "x"}, map[string]string{"example.com/k8s.io": "x"})}
	case 12:
		v.AzureFile = &corev1.AzureFileVolumeSource{SecretName: pick(r, "azure", ""), ShareName: pick(r, "share", "")}
	case 13, 14:
		a := &corev1.AzureDiskVolumeSource{DiskName: pick(r, "disk", ""),
			DataDiskURI: pick(r, "https://acct.blob.core.windows.net/c/d.vhd", "/subscriptions/s/resourcegroups/g/providers/microsoft.compute/disks/d", "", "http://x")}
		if maybe(r, 0.4) {
			a.CachingMode = ptr(pick[corev1.AzureDataDiskCachingMode](r, corev1.AzureDataDiskCachingNone, "Bogus"))
		}
		if maybe(r, 0.5) {
			a.Kind = ptr(pick[corev1.AzureDataDiskKind](r, corev1.AzureManagedDisk, corev1.AzureDedicatedBlobDisk, "Bogus"))
		}
		v.AzureDisk = a
	case 15:
		v.VsphereVolume = &corev1.VsphereVirtualDiskVolumeSource{VolumePath: pick(r, "[ds] vol.vmdk", "")}
	case 16:
		v.PhotonPersistentDisk = &corev1.PhotonPersistentDiskVolumeSource{PdID: pick(r, "pd", "")}
	case 17:
		v.PortworxVolume = &corev1.PortworxVolumeSource{VolumeID: pick(r, "pwx", "")}
	case 18:
		v.ScaleIO = &corev1.ScaleIOVolumeSource{Gateway: pick(r, "https://gw", ""), System: pick(r, "sys", ""), VolumeName: pick(r, "vol", ""),
			SecretRef: &corev1.LocalObjectReference{Name: "sio"}}
	case 19:
		v.StorageOS = &corev1.StorageOSVolumeSource{VolumeName: pick(r, "vol", "", "Bad_Vol"), VolumeNamespace: pick(r, "", "ns", "Bad NS"),
			SecretRef: pick(r, nil, &corev1.LocalObjectReference{}, &corev1.LocalObjectReference{Name: "s"})}
	case 20:
		v.Quobyte = &corev1.QuobyteVolumeSource{Registry: pick(r, "reg:7861", "", "reg", "a:1,b", "a:1,b:2", "x,y"), Volume: pick(r, "vol", ""),
			Tenant: pick(r, "", strings.Repeat("t", 65))}
	case 21:
		v.Glusterfs = &corev1.GlusterfsVolumeSource{EndpointsName: pick(r, "gluster", ""), Path: pick(r, "vol", "")}
	case 22:
		v.Flocker = &corev1.FlockerVolumeSource{DatasetName: pick(r, "", "ds", "a/b"), DatasetUUID: pick(r, "", "uuid")}
	case 23:
		if maybe(r, 0.5) {
			v.GCEPersistentDisk = &corev1.GCEPersistentDiskVolumeSource{PDName: pick(r, "pd", ""), Partition: pick[int32](r, 0, 1, 256, -1)}
		} else {
			v.AWSElasticBlockStore = &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: pick(r, "vol-1", ""), Partition: pick[int32](r, 0, 1, 256, -1)}
		}
	case 24:
		v.Secret = &corev1.SecretVolumeSource{SecretName: pick(r, "s", ""), DefaultMode: randMode(r), DefaultUser: randUser(r), Items: randKeyToPaths(r)}
	case 25:
		v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: pick(r, "cfg", "")},
			DefaultMode: randMode(r), DefaultUser: randUser(r), Items: randKeyToPaths(r)}
	}
	return v
}

// addStoredVolumes gives a stored pod spec volumes that older rules or
// enabled alpha features let in: an emptyDir's mode, file owners, a token
// path that is not local, an image volume without a reference. An update
// keeps what is stored and may keep using them.
func addStoredVolumes(r *rand.Rand, s *corev1.PodSpec) {
	var v corev1.VolumeSource
	switch r.Intn(4) {
	case 0:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{Mode: ptr[int32](0750)}
	case 1:
		v.Secret = &corev1.SecretVolumeSource{SecretName: "s", DefaultUser: ptr[int64](1000)}
	case 2:
		v.Projected = &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Path: pick(r, "/var/run/token", "../token"), ExpirationSeconds: ptr[int64](3600)}}}}
		s.ServiceAccountName = "builder"
	case 3:
		v.Image = &corev1.ImageVolumeSource{PullPolicy: corev1.PullIfNotPresent}
	}
	s.Volumes = append(s.Volumes, corev1.Volume{Name: "stored", VolumeSource: v})
}

// changeVolumes is an update's change of a spec's volumes: a new volume,
// or the stored ones edited (an emptyDir's mode, file owners, a token path,
// an image reference).
func changeVolumes(r *rand.Rand, s *corev1.PodSpec) {
	if len(s.Volumes) == 0 || maybe(r, 0.3) {
		addVolumes(r, s)
		return
	}
	v := &s.Volumes[r.Intn(len(s.Volumes))].VolumeSource
	switch {
	case v.EmptyDir != nil:
		v.EmptyDir.Mode = pick(r, nil, ptr[int32](0700), ptr[int32](04000))
	case v.Secret != nil:
		v.Secret.DefaultUser = pick(r, nil, ptr[int64](2000), ptr[int64](-1))
	case v.Projected != nil:
		for i := range v.Projected.Sources {
			if t := v.Projected.Sources[i].ServiceAccountToken; t != nil {
				t.Path = pick(r, "token", "/other", "../x")
			}
		}
		v.Projected.DefaultUser = pick(r, nil, ptr[int64](7))
	case v.Image != nil:
		v.Image.Reference = pick(r, "", "registry.example/data:v2")
	default:
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Mode: pick(r, nil, ptr[int32](0700))}}})
	}
}
