package core

import (
	"fmt"
	"net"
	"path"
	"reflect"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Volume validation as kube-apiserver 1.37 does it: every volume source,
// field by field, also those svcnet's nodes do not serve (a manifest written
// for another cluster is refused or accepted as there). The paths, values
// and messages are kube-apiserver's, including its oddities (a downward API
// item's errors name the source, not the item; a projected token's path
// errors name the projected volume; gcePersistentDisk's fields are checked
// under "persistentDisk" and cephFS's under "cephfs").

// validateVolumes returns the sources of the volumes that are valid, by
// name (volume mounts may refer to those only), and the errors of the rest.
// For a Pod (opts.podName set), the claim an ephemeral volume creates,
// "<pod>-<volume>", must have a valid name, and no persistentVolumeClaim
// volume may name such a claim.
func validateVolumes(vols []corev1.Volume, opts podSpecOptions, p *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	valid := map[string]corev1.VolumeSource{}
	names := sets.New[string]()
	created := sets.New[string]()
	if opts.podName != "" {
		for _, v := range vols {
			if v.Ephemeral != nil {
				created.Insert(opts.podName + "-" + v.Name)
			}
		}
	}
	for i, v := range vols {
		vp := p.Index(i)
		el := validateVolumeSource(&v.VolumeSource, v.Name, vp, opts)
		if v.Name == "" {
			el = append(el, field.Required(vp.Child("name"), ""))
		} else {
			el = append(el, dns1123Label(v.Name, vp.Child("name"))...)
		}
		if names.Has(v.Name) {
			el = append(el, field.Duplicate(vp.Child("name"), v.Name))
		}
		if len(el) == 0 {
			names.Insert(v.Name)
			valid[v.Name] = v.VolumeSource
		}
		errs = append(errs, el...)
		if c := v.PersistentVolumeClaim; c != nil && created.Has(c.ClaimName) {
			errs = append(errs, field.Invalid(vp.Child("persistentVolumeClaim", "claimName"), c.ClaimName,
				"must not reference a PVC that gets created for an ephemeral volume"))
		}
	}
	return valid, errs
}

// volumeTypes are the volume sources in the order kube-apiserver checks
// them (and names them in "may not specify more than 1 volume type").
func volumeTypes(v *corev1.VolumeSource) []struct {
	name string
	set  bool
} {
	return []struct {
		name string
		set  bool
	}{
		{"emptyDir", v.EmptyDir != nil}, {"hostPath", v.HostPath != nil}, {"gitRepo", v.GitRepo != nil},
		{"gcePersistentDisk", v.GCEPersistentDisk != nil}, {"awsElasticBlockStore", v.AWSElasticBlockStore != nil},
		{"secret", v.Secret != nil}, {"nfs", v.NFS != nil}, {"iscsi", v.ISCSI != nil}, {"glusterfs", v.Glusterfs != nil},
		{"flocker", v.Flocker != nil}, {"persistentVolumeClaim", v.PersistentVolumeClaim != nil}, {"rbd", v.RBD != nil},
		{"cinder", v.Cinder != nil}, {"cephFS", v.CephFS != nil}, {"quobyte", v.Quobyte != nil},
		// kube-apiserver spells this one's path so.
		{"downwarAPI", v.DownwardAPI != nil}, {"fc", v.FC != nil}, {"flexVolume", v.FlexVolume != nil},
		{"configMap", v.ConfigMap != nil}, {"azureFile", v.AzureFile != nil}, {"vsphereVolume", v.VsphereVolume != nil},
		{"photonPersistentDisk", v.PhotonPersistentDisk != nil}, {"portworxVolume", v.PortworxVolume != nil},
		{"azureDisk", v.AzureDisk != nil}, {"storageos", v.StorageOS != nil}, {"projected", v.Projected != nil},
		{"scaleIO", v.ScaleIO != nil}, {"csi", v.CSI != nil}, {"ephemeral", v.Ephemeral != nil}, {"image", v.Image != nil},
	}
}

// validateVolumeSource checks that exactly one source is set and validates
// the first one set (the others are refused).
func validateVolumeSource(v *corev1.VolumeSource, volName string, p *field.Path, opts podSpecOptions) field.ErrorList {
	var errs field.ErrorList
	n := 0
	for _, t := range volumeTypes(v) {
		if !t.set {
			continue
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(p.Child(t.name), "may not specify more than 1 volume type"))
		} else {
			n++
			errs = append(errs, validateOneSource(v, t.name, volName, p, opts)...)
		}
		// Checked for an iSCSI source whether it comes first or not.
		if t.name == "iscsi" && v.ISCSI.InitiatorName != nil && len(volName+":"+v.ISCSI.TargetPortal) > 64 {
			errs = append(errs, field.Invalid(p.Child("name"), volName,
				"Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if iscsi.initiatorName is specified."))
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a volume type"))
	}
	return errs
}

// validateOneSource validates the source named typ of v (p is the volume's
// path).
func validateOneSource(v *corev1.VolumeSource, typ, volName string, p *field.Path, opts podSpecOptions) field.ErrorList {
	var errs field.ErrorList
	switch typ {
	case "emptyDir":
		ep := p.Child("emptyDir")
		if l := v.EmptyDir.SizeLimit; l != nil && l.Sign() < 0 {
			errs = append(errs, field.Forbidden(ep.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
		if m := v.EmptyDir.Mode; m != nil && (*m > 01777 || *m < 0) {
			errs = append(errs, field.Invalid(ep.Child("mode"), *m, "must be a number between 0 and 01777 (octal), both inclusive"))
		}
	case "hostPath":
		hp := p.Child("hostPath")
		if v.HostPath.Path == "" {
			return field.ErrorList{field.Required(hp.Child("path"), "")}
		}
		errs = append(errs, noBacksteps(v.HostPath.Path, hp.Child("path"))...)
		if t := v.HostPath.Type; t != nil && !hostPathTypes.Has(*t) {
			errs = append(errs, field.NotSupported(hp.Child("type"), t, sets.List(hostPathTypes)))
		}
	case "gitRepo":
		gp := p.Child("gitRepo")
		errs = append(errs, required(v.GitRepo.Repository, gp.Child("repository"))...)
		errs = append(errs, localDescendingPath(v.GitRepo.Directory, gp.Child("directory"))...)
	case "gcePersistentDisk":
		gp := p.Child("persistentDisk")
		errs = append(errs, required(v.GCEPersistentDisk.PDName, gp.Child("pdName"))...)
		errs = append(errs, partition(v.GCEPersistentDisk.Partition, gp.Child("partition"))...)
	case "awsElasticBlockStore":
		ap := p.Child("awsElasticBlockStore")
		errs = append(errs, required(v.AWSElasticBlockStore.VolumeID, ap.Child("volumeID"))...)
		errs = append(errs, partition(v.AWSElasticBlockStore.Partition, ap.Child("partition"))...)
	case "secret":
		sp := p.Child("secret")
		errs = append(errs, validateKeyVolume(v.Secret.SecretName, sp.Child("secretName"), v.Secret.DefaultMode, v.Secret.DefaultUser, v.Secret.Items, sp)...)
	case "nfs":
		np := p.Child("nfs")
		errs = append(errs, required(v.NFS.Server, np.Child("server"))...)
		errs = append(errs, required(v.NFS.Path, np.Child("path"))...)
		if !path.IsAbs(v.NFS.Path) {
			errs = append(errs, field.Invalid(np.Child("path"), v.NFS.Path, "must be an absolute path"))
		}
	case "iscsi":
		errs = append(errs, validateISCSI(v.ISCSI, p.Child("iscsi"))...)
	case "glusterfs":
		gp := p.Child("glusterfs")
		errs = append(errs, required(v.Glusterfs.EndpointsName, gp.Child("endpoints"))...)
		errs = append(errs, required(v.Glusterfs.Path, gp.Child("path"))...)
	case "flocker":
		fp := p.Child("flocker")
		name, uuid := v.Flocker.DatasetName, v.Flocker.DatasetUUID
		if name == "" && uuid == "" {
			errs = append(errs, field.Required(fp, "one of datasetName and datasetUUID is required"))
		}
		if name != "" && uuid != "" {
			errs = append(errs, field.Invalid(fp, "resource", "datasetName and datasetUUID can not be specified simultaneously"))
		}
		if strings.Contains(name, "/") {
			errs = append(errs, field.Invalid(fp.Child("datasetName"), name, "must not contain '/'"))
		}
	case "persistentVolumeClaim":
		errs = append(errs, required(v.PersistentVolumeClaim.ClaimName, p.Child("persistentVolumeClaim", "claimName"))...)
	case "rbd":
		rp := p.Child("rbd")
		if len(v.RBD.CephMonitors) == 0 {
			errs = append(errs, field.Required(rp.Child("monitors"), ""))
		}
		errs = append(errs, required(v.RBD.RBDImage, rp.Child("image"))...)
	case "cinder":
		cp := p.Child("cinder")
		errs = append(errs, required(v.Cinder.VolumeID, cp.Child("volumeID"))...)
		if ref := v.Cinder.SecretRef; ref != nil {
			errs = append(errs, required(ref.Name, cp.Child("secretRef", "name"))...)
		}
	case "cephFS":
		if len(v.CephFS.Monitors) == 0 {
			errs = append(errs, field.Required(p.Child("cephfs", "monitors"), ""))
		}
	case "quobyte":
		errs = append(errs, validateQuobyte(v.Quobyte, p.Child("quobyte"))...)
	case "downwarAPI":
		dp := p.Child("downwardAPI")
		errs = append(errs, validateFileMode(v.DownwardAPI.DefaultMode, dp.Child("defaultMode"))...)
		errs = append(errs, validateUserID(v.DownwardAPI.DefaultUser, dp.Child("defaultUser"))...)
		for i := range v.DownwardAPI.Items {
			// As kube-apiserver: the item's errors name the source.
			errs = append(errs, validateDownwardAPIFile(&v.DownwardAPI.Items[i], dp)...)
		}
	case "fc":
		errs = append(errs, validateFC(v.FC, p.Child("fc"))...)
	case "flexVolume":
		errs = append(errs, validateFlexVolume(v.FlexVolume, p.Child("flexVolume"))...)
	case "configMap":
		cp := p.Child("configMap")
		errs = append(errs, validateKeyVolume(v.ConfigMap.Name, cp.Child("name"), v.ConfigMap.DefaultMode, v.ConfigMap.DefaultUser, v.ConfigMap.Items, cp)...)
	case "azureFile":
		ap := p.Child("azureFile")
		errs = append(errs, required(v.AzureFile.SecretName, ap.Child("secretName"))...)
		errs = append(errs, required(v.AzureFile.ShareName, ap.Child("shareName"))...)
	case "vsphereVolume":
		errs = append(errs, required(v.VsphereVolume.VolumePath, p.Child("vsphereVolume", "volumePath"))...)
	case "photonPersistentDisk":
		errs = append(errs, required(v.PhotonPersistentDisk.PdID, p.Child("photonPersistentDisk", "pdID"))...)
	case "portworxVolume":
		errs = append(errs, required(v.PortworxVolume.VolumeID, p.Child("portworxVolume", "volumeID"))...)
	case "azureDisk":
		errs = append(errs, validateAzureDisk(v.AzureDisk, p.Child("azureDisk"))...)
	case "storageos":
		sp := p.Child("storageos")
		if v.StorageOS.VolumeName == "" {
			errs = append(errs, field.Required(sp.Child("volumeName"), ""))
		} else {
			errs = append(errs, dns1123Label(v.StorageOS.VolumeName, sp.Child("volumeName"))...)
		}
		if v.StorageOS.VolumeNamespace != "" {
			errs = append(errs, dns1123Label(v.StorageOS.VolumeNamespace, sp.Child("volumeNamespace"))...)
		}
		if ref := v.StorageOS.SecretRef; ref != nil {
			errs = append(errs, required(ref.Name, sp.Child("secretRef", "name"))...)
		}
	case "projected":
		errs = append(errs, validateProjected(v.Projected, p.Child("projected"), opts)...)
	case "scaleIO":
		sp := p.Child("scaleIO")
		errs = append(errs, required(v.ScaleIO.Gateway, sp.Child("gateway"))...)
		errs = append(errs, required(v.ScaleIO.System, sp.Child("system"))...)
		errs = append(errs, required(v.ScaleIO.VolumeName, sp.Child("volumeName"))...)
	case "csi":
		errs = append(errs, validateCSI(v.CSI, p.Child("csi"))...)
	case "ephemeral":
		ep := p.Child("ephemeral")
		if t := v.Ephemeral.VolumeClaimTemplate; t == nil {
			errs = append(errs, field.Required(ep.Child("volumeClaimTemplate"), ""))
		} else {
			errs = append(errs, validateClaimTemplate(t, ep.Child("volumeClaimTemplate"))...)
		}
		// The claim a Pod's ephemeral volume creates is "<pod>-<volume>"
		// (a template has no name yet).
		if opts.podName != "" && volName != "" {
			claim := opts.podName + "-" + volName
			for _, msg := range validation.IsDNS1123Subdomain(claim) {
				errs = append(errs, field.Invalid(p.Child("name"), volName, fmt.Sprintf("PVC name %q: %v", claim, msg)))
			}
		}
	case "image":
		ip := p.Child("image")
		if !opts.allowEmptyImageVolumeReference && v.Image.Reference == "" {
			errs = append(errs, field.Required(ip.Child("reference"), ""))
		}
		errs = append(errs, validatePullPolicy(v.Image.PullPolicy, ip.Child("pullPolicy"))...)
	}
	return errs
}

var hostPathTypes = sets.New(corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
	corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev)

// required: an empty string is Required.
func required(v string, p *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return nil
}

func partition(n int32, p *field.Path) field.ErrorList {
	if n < 0 || n > 255 {
		return field.ErrorList{field.Invalid(p, n, validation.InclusiveRangeError(1, 255))}
	}
	return nil
}

func validateFileMode(m *int32, p *field.Path) field.ErrorList {
	if m != nil && (*m > 0777 || *m < 0) {
		return field.ErrorList{field.Invalid(p, *m, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

// validateUserID: a file owner must be a valid user ID.
func validateUserID(u *int64, p *field.Path) field.ErrorList {
	if u == nil {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidUserID(*u) {
		errs = append(errs, field.Invalid(p, *u, msg))
	}
	return errs
}

// localNonReservedPath: relative, without ".." elements, not starting
// with "..".
func localNonReservedPath(target string, p *field.Path) field.ErrorList {
	errs := localDescendingPath(target, p)
	// A leading "../" is the ".." element reported above.
	if strings.HasPrefix(target, "..") && !strings.HasPrefix(target, "../") {
		errs = append(errs, field.Invalid(p, target, "must not start with '..'"))
	}
	return errs
}

func validateKeyToPath(kp *corev1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if kp.Key == "" {
		errs = append(errs, field.Required(p.Child("key"), ""))
	}
	if kp.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(kp.Path, p.Child("path"))...)
	errs = append(errs, validateFileMode(kp.Mode, p.Child("mode"))...)
	return append(errs, validateUserID(kp.User, p.Child("user"))...)
}

var (
	iqnFormat = regexp.MustCompile(`iqn\.\d{4}-\d{2}\.([[:alnum:]-.]+)(:[^,;*&$|\s]+)$`)
	euiFormat = regexp.MustCompile(`^eui.[[:alnum:]]{16}$`)
	naaFormat = regexp.MustCompile(`^naa.[[:alnum:]]{32}$`)
)

// iscsiNameFormatError is "must be valid format" when an IQN, EUI or NAA
// name does not match its format.
func iscsiNameFormatError(name string) bool {
	switch {
	case strings.HasPrefix(name, "iqn"):
		return !iqnFormat.MatchString(name)
	case strings.HasPrefix(name, "eui"):
		return !euiFormat.MatchString(name)
	case strings.HasPrefix(name, "naa"):
		return !naaFormat.MatchString(name)
	}
	return false
}

func iscsiPrefixed(name string) bool {
	return strings.HasPrefix(name, "iqn") || strings.HasPrefix(name, "eui") || strings.HasPrefix(name, "naa")
}

func validateISCSI(s *corev1.ISCSIVolumeSource, p *field.Path) field.ErrorList {
	errs := required(s.TargetPortal, p.Child("targetPortal"))
	switch {
	case s.IQN == "":
		errs = append(errs, field.Required(p.Child("iqn"), ""))
	case !iscsiPrefixed(s.IQN):
		errs = append(errs, field.Invalid(p.Child("iqn"), s.IQN, "must be valid format starting with iqn, eui, or naa"))
	case iscsiNameFormatError(s.IQN):
		errs = append(errs, field.Invalid(p.Child("iqn"), s.IQN, "must be valid format"))
	}
	if s.Lun < 0 || s.Lun > 255 {
		errs = append(errs, field.Invalid(p.Child("lun"), s.Lun, validation.InclusiveRangeError(0, 255)))
	}
	if (s.DiscoveryCHAPAuth || s.SessionCHAPAuth) && s.SecretRef == nil {
		errs = append(errs, field.Required(p.Child("secretRef"), ""))
	}
	if s.InitiatorName != nil {
		name := *s.InitiatorName
		// kube-apiserver spells this path in lower case.
		ip := p.Child("initiatorname")
		if !iscsiPrefixed(name) {
			errs = append(errs, field.Invalid(ip, name, "must be valid format starting with iqn, eui, or naa"))
		}
		if iscsiNameFormatError(name) {
			errs = append(errs, field.Invalid(ip, name, "must be valid format"))
		}
	}
	return errs
}

func validateQuobyte(q *corev1.QuobyteVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	const registryFormat = "must be a host:port pair or multiple pairs separated by commas"
	switch {
	case q.Registry == "":
		errs = append(errs, field.Required(p.Child("registry"), registryFormat))
	case len(q.Tenant) >= 65:
		errs = append(errs, field.Required(p.Child("tenant"), "must be a UUID and may not exceed a length of 64 characters"))
	default:
		// One error per pair that is not host:port.
		for _, pair := range strings.Split(q.Registry, ",") {
			if _, _, err := net.SplitHostPort(pair); err != nil {
				errs = append(errs, field.Invalid(p.Child("registry"), q.Registry, registryFormat))
			}
		}
	}
	return append(errs, required(q.Volume, p.Child("volume"))...)
}

func validateFC(fc *corev1.FCVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(fc.TargetWWNs) == 0 && len(fc.WWIDs) == 0 {
		errs = append(errs, field.Required(p.Child("targetWWNs"), "must specify either targetWWNs or wwids, but not both"))
	}
	if len(fc.TargetWWNs) != 0 && len(fc.WWIDs) != 0 {
		errs = append(errs, field.Invalid(p.Child("targetWWNs"), fc.TargetWWNs, "targetWWNs and wwids can not be specified simultaneously"))
	}
	if len(fc.TargetWWNs) != 0 {
		switch {
		case fc.Lun == nil:
			errs = append(errs, field.Required(p.Child("lun"), "lun is required if targetWWNs is specified"))
		case *fc.Lun < 0 || *fc.Lun > 255:
			errs = append(errs, field.Invalid(p.Child("lun"), fc.Lun, validation.InclusiveRangeError(0, 255)))
		}
	}
	return errs
}

// validateFlexVolume: a driver, and no options in the kubernetes.io and
// k8s.io namespaces (kube-apiserver walks the options map in Go's random
// order; svcnet in key order, which matters only for several such keys).
func validateFlexVolume(fv *corev1.FlexVolumeSource, p *field.Path) field.ErrorList {
	errs := required(fv.Driver, p.Child("driver"))
	for _, k := range sortedKeys(fv.Options) {
		ns := k
		if before, _, ok := strings.Cut(k, "/"); ok {
			ns = before
		}
		dotted := "." + strings.ToLower(ns)
		if strings.HasSuffix(dotted, ".kubernetes.io") || strings.HasSuffix(dotted, ".k8s.io") {
			errs = append(errs, field.Invalid(p.Child("options").Key(k), k, "kubernetes.io and k8s.io namespaces are reserved"))
		}
	}
	return errs
}

var (
	azureCachingModes = sets.New(corev1.AzureDataDiskCachingNone, corev1.AzureDataDiskCachingReadOnly, corev1.AzureDataDiskCachingReadWrite)
	azureDiskKinds    = sets.New(corev1.AzureSharedBlobDisk, corev1.AzureDedicatedBlobDisk, corev1.AzureManagedDisk)
)

func validateAzureDisk(a *corev1.AzureDiskVolumeSource, p *field.Path) field.ErrorList {
	errs := required(a.DiskName, p.Child("diskName"))
	errs = append(errs, required(a.DataDiskURI, p.Child("diskURI"))...)
	if m := a.CachingMode; m != nil && !azureCachingModes.Has(*m) {
		errs = append(errs, field.NotSupported(p.Child("cachingMode"), *m, sets.List(azureCachingModes)))
	}
	if k := a.Kind; k != nil && !azureDiskKinds.Has(*k) {
		errs = append(errs, field.NotSupported(p.Child("kind"), *k, sets.List(azureDiskKinds)))
	}
	if k := a.Kind; k != nil {
		managed := *k == corev1.AzureManagedDisk
		switch {
		case managed && !strings.HasPrefix(a.DataDiskURI, "/subscriptions/"):
			errs = append(errs, field.NotSupported(p.Child("diskURI"), a.DataDiskURI,
				[]string{"/subscriptions/{sub-id}/resourcegroups/{group-name}/providers/microsoft.compute/disks/{disk-id}"}))
		case !managed && !strings.HasPrefix(a.DataDiskURI, "https://"):
			errs = append(errs, field.NotSupported(p.Child("diskURI"), a.DataDiskURI,
				[]string{"https://{account-name}.blob.core.windows.net/{container-name}/{disk-name}.vhd"}))
		}
	}
	return errs
}

// validateCSIDriverName: required, at most 63 characters, a DNS subdomain
// ignoring case.
func validateCSIDriverName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if len(name) > 63 {
		errs = append(errs, field.TooLong(p, "", 63))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func validateCSI(c *corev1.CSIVolumeSource, p *field.Path) field.ErrorList {
	errs := validateCSIDriverName(c.Driver, p.Child("driver"))
	if ref := c.NodePublishSecretRef; ref != nil {
		if ref.Name == "" {
			errs = append(errs, field.Required(p.Child("nodePublishSecretRef", "name"), ""))
		} else {
			// kube-apiserver names this csi.name.
			for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
			}
		}
	}
	return errs
}

var volumeFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.labels", "metadata.annotations", "metadata.uid")

// validateDownwardAPIFile is one file of a downward API volume or
// projection; p is the source's path (kube-apiserver does not index the
// items).
func validateDownwardAPIFile(f *corev1.DownwardAPIVolumeFile, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if f.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(f.Path, p.Child("path"))...)
	switch {
	case f.FieldRef != nil:
		errs = append(errs, validateObjectFieldSelector(f.FieldRef, volumeFieldPaths, p.Child("fieldRef"))...)
		if f.ResourceFieldRef != nil {
			errs = append(errs, field.Invalid(p, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case f.ResourceFieldRef != nil:
		errs = append(errs, validateResourceFieldSelector(f.ResourceFieldRef, p.Child("resourceFieldRef"), true)...)
	default:
		errs = append(errs, field.Required(p, "one of fieldRef and resourceFieldRef is required"))
	}
	errs = append(errs, validateFileMode(f.Mode, p.Child("mode"))...)
	return append(errs, validateUserID(f.User, p.Child("user"))...)
}

func validateProjected(pv *corev1.ProjectedVolumeSource, p *field.Path, opts podSpecOptions) field.ErrorList {
	errs := validateFileMode(pv.DefaultMode, p.Child("defaultMode"))
	errs = append(errs, validateUserID(pv.DefaultUser, p.Child("defaultUser"))...)
	// The files of all sources share the volume: a path written twice is
	// refused (reported on the volume, with the source's name or the path).
	paths := sets.New[string]()
	claim := func(file string, value string) field.ErrorList {
		if paths.Has(file) {
			return field.ErrorList{field.Invalid(p, value, "conflicting duplicate paths")}
		}
		paths.Insert(file)
		return nil
	}
	for i, src := range pv.Sources {
		sp := p.Child("sources").Index(i)
		n := 0
		if s := src.Secret; s != nil {
			n++
			errs = append(errs, validateProjectedItems(s.Name, s.Items, sp.Child("secret"), claim)...)
		}
		if c := src.ConfigMap; c != nil {
			n++
			errs = append(errs, validateProjectedItems(c.Name, c.Items, sp.Child("configMap"), claim)...)
		}
		if d := src.DownwardAPI; d != nil {
			n++
			dp := sp.Child("downwardAPI")
			for j := range d.Items {
				f := &d.Items[j]
				errs = append(errs, validateDownwardAPIFile(f, dp)...)
				if f.Path != "" {
					errs = append(errs, claim(f.Path, f.Path)...)
				}
			}
		}
		if t := src.ServiceAccountToken; t != nil {
			n++
			tp := sp.Child("serviceAccountToken")
			if exp := t.ExpirationSeconds; exp == nil {
				errs = append(errs, field.Required(tp.Child("expirationSeconds"), ""))
			} else {
				if *exp < 10*60 {
					errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *exp, "may not specify a duration less than 10 minutes"))
				}
				if *exp > 1<<32 {
					errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *exp, "may not specify a duration larger than 2^32 seconds"))
				}
			}
			// As kube-apiserver: the token's path errors name the
			// projected volume's path, and the token's file is not
			// checked against the other sources'.
			if t.Path == "" {
				errs = append(errs, field.Required(p.Child("path"), ""))
			} else if !opts.allowNonLocalProjectedTokenPath {
				errs = append(errs, localNonReservedPath(t.Path, p.Child("path"))...)
			}
			errs = append(errs, validateUserID(t.User, tp.Child("user"))...)
		}
		if b := src.ClusterTrustBundle; b != nil {
			n++
			errs = append(errs, validateClusterTrustBundleProjection(b, sp.Child("clusterTrustBundle"))...)
			errs = append(errs, claim(b.Path, b.Path)...)
		}
		if c := src.PodCertificate; c != nil {
			n++
			errs = append(errs, validatePodCertificateProjection(c, sp.Child("podCertificate"), claim)...)
		}
		if n > 1 {
			errs = append(errs, field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

// validateProjectedItems: a projected secret's or configMap's name and
// items; each item's path is claimed in the volume.
func validateProjectedItems(name string, items []corev1.KeyToPath, p *field.Path, claim func(file, value string) field.ErrorList) field.ErrorList {
	errs := required(name, p.Child("name"))
	for i := range items {
		errs = append(errs, validateKeyToPath(&items[i], p.Child("items").Index(i))...)
		if items[i].Path != "" {
			errs = append(errs, claim(items[i].Path, name)...)
		}
	}
	return errs
}

// ClusterTrustBundleProjection is how kube-apiserver shows a
// clusterTrustBundle projection in an error (its internal type, which has
// no JSON tags).
type ClusterTrustBundleProjection struct {
	Name          *string
	SignerName    *string
	LabelSelector *metav1.LabelSelector
	Optional      *bool
	Path          string
	User          *int64
}

func validateClusterTrustBundleProjection(b *corev1.ClusterTrustBundleProjection, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Name != nil && b.SignerName != nil:
		errs = append(errs, field.Invalid(p, &ClusterTrustBundleProjection{Name: b.Name, SignerName: b.SignerName,
			LabelSelector: b.LabelSelector, Optional: b.Optional, Path: b.Path, User: b.User}, "only one of name and signerName may be used"))
	case b.Name != nil:
		name := *b.Name
		if name == "" {
			errs = append(errs, field.Required(p.Child("name"), "must be a valid object name"))
		}
		for _, msg := range clusterTrustBundleNameErrors(name) {
			errs = append(errs, field.Invalid(p.Child("name"), name, fmt.Sprintf("not a valid clustertrustbundlename: %v", msg)))
		}
		if b.LabelSelector != nil {
			errs = append(errs, field.Invalid(p.Child("labelSelector"), b.LabelSelector, "labelSelector must be unset if name is specified"))
		}
	case b.SignerName != nil:
		if *b.SignerName == "" {
			errs = append(errs, field.Required(p.Child("signerName"), "must be a valid signer name"))
		}
		errs = append(errs, validateSignerName(p.Child("signerName"), *b.SignerName)...)
		errs = append(errs, metavalidation.ValidateLabelSelector(b.LabelSelector, metavalidation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
	default:
		errs = append(errs, field.Required(p, "either name or signerName must be specified"))
	}
	if b.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, validateUserID(b.User, p.Child("user"))...)
	return append(errs, localNonReservedPath(b.Path, p.Child("path"))...)
}

// clusterTrustBundleNameErrors: a bundle named "<signer, its / written
// :>:<name>" belongs to that signer and must start with its prefix before
// a valid object name; a name without a colon is an object name.
func clusterTrustBundleNameErrors(name string) []string {
	i := strings.LastIndex(name, ":")
	if i == -1 {
		return validation.IsDNS1123Subdomain(name)
	}
	signer := strings.ReplaceAll(name[:i], ":", "/")
	if signer == "" {
		return []string{"ClusterTrustBundle without signer name must not have \":\" in its name"}
	}
	prefix := strings.ReplaceAll(signer, "/", ":") + ":"
	if !strings.HasPrefix(name, prefix) {
		return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", signer, prefix)}
	}
	return validation.IsDNS1123Subdomain(strings.TrimPrefix(name, prefix))
}

// validateSignerName: "<domain>/<path>", the domain of at least two DNS
// labels, the path of DNS subdomains separated by dots.
func validateSignerName(p *field.Path, signer string) field.ErrorList {
	if signer == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	parts := strings.Split(signer, "/")
	if len(parts) != 2 {
		return field.ErrorList{field.Invalid(p, signer, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	domain, rest := parts[0], parts[1]
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(p, "", validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(domain, ".")
	for _, l := range labels {
		msgs := validation.IsDNS1123Label(l)
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(p, domain, fmt.Sprintf("validating label %q: %s", l, msg)))
		}
		if len(msgs) > 0 {
			break // the first bad label only
		}
	}
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(p, domain, "should be a domain with at least two segments separated by dots"))
	}
	for _, l := range strings.Split(rest, ".") {
		msgs := validation.IsDNS1123Subdomain(l)
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(p, rest, fmt.Sprintf("validating label %q: %s", l, msg)))
		}
		if len(msgs) > 0 {
			break
		}
	}
	if maxLen := 2*validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 2; len(signer) > maxLen {
		errs = append(errs, field.TooLong(p, "", maxLen))
	}
	return errs
}

// isKubernetesSigner: signers of kubernetes.io and its subdomains.
func isKubernetesSigner(signer string) bool {
	host, _, _ := strings.Cut(signer, "/")
	return host == "kubernetes.io" || strings.HasSuffix(host, ".kubernetes.io")
}

var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

func validatePodCertificateProjection(c *corev1.PodCertificateProjection, p *field.Path, claim func(file, value string) field.ErrorList) field.ErrorList {
	errs := validateSignerName(p.Child("signerName"), c.SignerName)
	if c.UserAnnotations != nil {
		up := p.Child("userAnnotations")
		// kube-apiserver walks the map in Go's random order; svcnet in
		// key order.
		for _, k := range sortedKeys(c.UserAnnotations) {
			errs = append(errs, validation.IsDomainPrefixedKey(up, strings.ToLower(k))...)
		}
		if apivalidation.ValidateAnnotationsSize(c.UserAnnotations) != nil {
			errs = append(errs, field.TooLong(up, "", apivalidation.TotalAnnotationSizeLimitB))
		}
	}
	errs = append(errs, validateUserID(c.User, p.Child("user"))...)
	if !sets.New(podCertificateKeyTypes...).Has(c.KeyType) {
		errs = append(errs, field.NotSupported(p.Child("keyType"), c.KeyType, podCertificateKeyTypes))
	}
	if m := c.MaxExpirationSeconds; m != nil {
		if *m < 3600 {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *m, "if provided, maxExpirationSeconds must be >= 3600"))
		}
		// 91 days, or one for the signers of kubernetes.io.
		limit := 91 * 24 * 60 * 60
		if isKubernetesSigner(c.SignerName) {
			limit = 24 * 60 * 60
		}
		if *m > int32(limit) {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *m, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", limit)))
		}
	}
	n := 0
	for _, f := range []struct {
		name, path string
	}{{"credentialBundlePath", c.CredentialBundlePath}, {"keyPath", c.KeyPath}, {"certificateChainPath", c.CertificateChainPath}} {
		if f.path == "" {
			continue
		}
		n++
		errs = append(errs, localNonReservedPath(f.path, p.Child(f.name))...)
		errs = append(errs, claim(f.path, f.path)...)
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
	}
	return errs
}

// validateClaimTemplate is an ephemeral volume's claim template: labels
// and annotations only in its metadata, and a valid claim spec.
func validateClaimTemplate(t *corev1.PersistentVolumeClaimTemplate, p *field.Path) field.ErrorList {
	mp := p.Child("metadata")
	errs := apivalidation.ValidateAnnotations(t.Annotations, mp.Child("annotations"))
	errs = append(errs, metavalidation.ValidateLabels(t.Labels, mp.Child("labels"))...)
	// Every other metadata field is refused, in the struct's order.
	mv := reflect.ValueOf(t.ObjectMeta)
	for i := 0; i < mv.NumField(); i++ {
		f := mv.Type().Field(i)
		if f.Name == "Labels" || f.Name == "Annotations" || mv.Field(i).IsZero() {
			continue
		}
		r, size := utf8.DecodeRuneInString(f.Name)
		errs = append(errs, field.Forbidden(mp.Child(string(unicode.ToLower(r))+f.Name[size:]), "cannot be set"))
	}
	return append(errs, validateClaimSpec(&t.Spec, p.Child("spec"))...)
}

var (
	accessModes = sets.New(corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod)
	volumeModes = sets.New(corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem)
)

// validateClaimSpec is kube-apiserver's check of a claim's spec, as a new
// claim's.
func validateClaimSpec(s *corev1.PersistentVolumeClaimSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.AccessModes) == 0 {
		errs = append(errs, field.Required(p.Child("accessModes"), "at least 1 access mode is required"))
	}
	if s.Selector != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(s.Selector, metavalidation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	rwop, other := false, false
	for _, m := range s.AccessModes {
		if !accessModes.Has(m) {
			errs = append(errs, field.NotSupported(p.Child("accessModes"), m, sets.List(accessModes)))
		}
		if m == corev1.ReadWriteOncePod {
			rwop = true
		} else if accessModes.Has(m) {
			other = true
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(p.Child("accessModes"), "may not use ReadWriteOncePod with other access modes"))
	}
	sizePath := p.Child("resources").Key(string(corev1.ResourceStorage))
	if size, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(sizePath, ""))
	} else if size.Cmp(resource.Quantity{}) <= 0 {
		errs = append(errs, field.Invalid(sizePath, size.String(), "must be greater than zero"))
	}
	if c := s.StorageClassName; c != nil && *c != "" {
		for _, msg := range validation.IsDNS1123Subdomain(*c) {
			errs = append(errs, field.Invalid(p.Child("storageClassName"), *c, msg))
		}
	}
	if m := s.VolumeMode; m != nil && !volumeModes.Has(*m) {
		errs = append(errs, field.NotSupported(p.Child("volumeMode"), *m, sets.List(volumeModes)))
	}
	if ds := s.DataSource; ds != nil {
		errs = append(errs, validateDataSource(ds.Name, ds.Kind, ds.APIGroup, nil, p.Child("dataSource"))...)
	}
	if ref := s.DataSourceRef; ref != nil {
		errs = append(errs, validateDataSource(ref.Name, ref.Kind, ref.APIGroup, ref.Namespace, p.Child("dataSourceRef"))...)
	}
	if ref := s.DataSourceRef; ref != nil && ref.Namespace != nil && *ref.Namespace != "" {
		if s.DataSource != nil {
			errs = append(errs, field.Invalid(p, p.Child("dataSource"), "may not be specified when dataSourceRef.namespace is specified"))
		}
	} else if ds := s.DataSource; ds != nil && ref != nil {
		if !reflect.DeepEqual(ds.APIGroup, ref.APIGroup) || ds.Kind != ref.Kind || ds.Name != ref.Name {
			errs = append(errs, field.Invalid(p, p.Child("dataSource"), "must match dataSourceRef"))
		}
	}
	if c := s.VolumeAttributesClassName; c != nil && *c != "" {
		for _, msg := range validation.IsDNS1123Subdomain(*c) {
			errs = append(errs, field.Invalid(p.Child("volumeAttributesClassName"), *c, msg))
		}
	}
	return errs
}

// validateDataSource is a claim's dataSource or dataSourceRef (the latter
// may name a namespace).
func validateDataSource(name, kind string, group, namespace *string, p *field.Path) field.ErrorList {
	errs := required(name, p.Child("name"))
	errs = append(errs, required(kind, p.Child("kind"))...)
	g := ""
	if group != nil {
		g = *group
	}
	if g == "" && kind != "PersistentVolumeClaim" {
		errs = append(errs, field.Invalid(p, kind, "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
	}
	if g != "" {
		for _, msg := range validation.IsDNS1123Subdomain(g) {
			errs = append(errs, field.Invalid(p.Child("apiGroup"), g, msg))
		}
	}
	if namespace != nil && *namespace != "" {
		for _, msg := range validation.IsDNS1123Label(*namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), *namespace, msg))
		}
	}
	return errs
}

var pullPolicies = []string{string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever)}

func validatePullPolicy(pp corev1.PullPolicy, p *field.Path) field.ErrorList {
	switch pp {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return nil
	case "":
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, pp, pullPolicies)}
}

// dropDisabledVolumeFields clears what kube-apiserver 1.37's feature gates
// keep out of new objects (EmptyDirVolumeMode and
// AtomicWriteVolumeUserFields are alpha, off): an emptyDir's mode and the
// owners (user, defaultUser) of atomically written files, unless the stored
// spec (old, nil on create) uses them already. As kube-apiserver, only the
// first source set of a volume (secret, configMap, downwardAPI, projected)
// and of a projection loses its owners.
func dropDisabledVolumeFields(spec, old *corev1.PodSpec) {
	if !emptyDirModeInUse(old) {
		for i := range spec.Volumes {
			if e := spec.Volumes[i].EmptyDir; e != nil {
				e.Mode = nil
			}
		}
	}
	if volumeUsersInUse(old) {
		return
	}
	itemUsers := func(items []corev1.KeyToPath) {
		for i := range items {
			items[i].User = nil
		}
	}
	fileUsers := func(items []corev1.DownwardAPIVolumeFile) {
		for i := range items {
			items[i].User = nil
		}
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i].VolumeSource
		switch {
		case v.Secret != nil:
			v.Secret.DefaultUser = nil
			itemUsers(v.Secret.Items)
		case v.ConfigMap != nil:
			v.ConfigMap.DefaultUser = nil
			itemUsers(v.ConfigMap.Items)
		case v.DownwardAPI != nil:
			v.DownwardAPI.DefaultUser = nil
			fileUsers(v.DownwardAPI.Items)
		case v.Projected != nil:
			v.Projected.DefaultUser = nil
			for j := range v.Projected.Sources {
				s := &v.Projected.Sources[j]
				switch {
				case s.Secret != nil:
					itemUsers(s.Secret.Items)
				case s.DownwardAPI != nil:
					fileUsers(s.DownwardAPI.Items)
				case s.ConfigMap != nil:
					itemUsers(s.ConfigMap.Items)
				case s.ServiceAccountToken != nil:
					s.ServiceAccountToken.User = nil
				case s.ClusterTrustBundle != nil:
					s.ClusterTrustBundle.User = nil
				case s.PodCertificate != nil:
					s.PodCertificate.User = nil
				}
			}
		}
	}
}

func emptyDirModeInUse(spec *corev1.PodSpec) bool {
	if spec == nil {
		return false
	}
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Mode != nil {
			return true
		}
	}
	return false
}

// volumeUsersInUse: a file owner is set in the first source of a volume
// or projection (as kube-apiserver looks).
func volumeUsersInUse(spec *corev1.PodSpec) bool {
	if spec == nil {
		return false
	}
	items := func(l []corev1.KeyToPath) bool {
		for _, it := range l {
			if it.User != nil {
				return true
			}
		}
		return false
	}
	files := func(l []corev1.DownwardAPIVolumeFile) bool {
		for _, f := range l {
			if f.User != nil {
				return true
			}
		}
		return false
	}
	for _, vol := range spec.Volumes {
		v := &vol.VolumeSource
		switch {
		case v.Secret != nil:
			if v.Secret.DefaultUser != nil || items(v.Secret.Items) {
				return true
			}
		case v.ConfigMap != nil:
			if v.ConfigMap.DefaultUser != nil || items(v.ConfigMap.Items) {
				return true
			}
		case v.DownwardAPI != nil:
			if v.DownwardAPI.DefaultUser != nil || files(v.DownwardAPI.Items) {
				return true
			}
		case v.Projected != nil:
			if v.Projected.DefaultUser != nil {
				return true
			}
			for _, s := range v.Projected.Sources {
				var in bool
				switch {
				case s.Secret != nil:
					in = items(s.Secret.Items)
				case s.DownwardAPI != nil:
					in = files(s.DownwardAPI.Items)
				case s.ConfigMap != nil:
					in = items(s.ConfigMap.Items)
				case s.ServiceAccountToken != nil:
					in = s.ServiceAccountToken.User != nil
				case s.ClusterTrustBundle != nil:
					in = s.ClusterTrustBundle.User != nil
				case s.PodCertificate != nil:
					in = s.PodCertificate.User != nil
				}
				if in {
					return true
				}
			}
		}
	}
	return false
}

// validateKeyVolume is a secret or configMap volume source: its object's
// name (at namePath), defaultMode, defaultUser and items.
func validateKeyVolume(name string, namePath *field.Path, mode *int32, user *int64, items []corev1.KeyToPath, p *field.Path) field.ErrorList {
	errs := required(name, namePath)
	errs = append(errs, validateFileMode(mode, p.Child("defaultMode"))...)
	errs = append(errs, validateUserID(user, p.Child("defaultUser"))...)
	for i := range items {
		errs = append(errs, validateKeyToPath(&items[i], p.Child("items").Index(i))...)
	}
	return errs
}
