package core

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A Pod's ephemeral volume creates the claim "<pod>-<volume>": its name
// must be valid, and no other volume may name it.
func TestEphemeralClaimNames(t *testing.T) {
	eph := corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}
	vols := []corev1.Volume{
		{Name: "data", VolumeSource: eph},
		{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "Web-data"}}},
	}
	_, errs := validateVolumes(vols, "Web", field.NewPath("spec", "volumes"))
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
	if _, errs := validateVolumes(vols, "", field.NewPath("spec", "volumes")); len(errs) != 0 {
		t.Errorf("template errors %v", errs)
	}
}
