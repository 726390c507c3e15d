package core

import (
	"crypto/tls"
	"encoding/json"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/registry"
)

// maxSecretSize is the most a Secret's data may hold (kube-apiserver's
// MaxSecretSize, 1 MiB).
const maxSecretSize = 1 << 20

// NewSecretStrategy: Secrets as kube-apiserver 1.37 stores them. A write's
// stringData is folded into data (a key in both takes stringData's value)
// and never stored, as the v1 conversion does; an empty type is Opaque.
// Validated as ValidateSecret and ValidateSecretUpdate: keys, 1 MiB of
// data, the keys each built-in type requires (well-formed JSON for the
// docker config types), type immutable, and nothing changes once
// immutable. A kubernetes.io/tls Secret whose certificate and key do not
// form a pair is stored with a warning (the crypto/tls error), as
// kube-apiserver warns. Field selector: type.
func NewSecretStrategy() registry.Strategy {
	return WithDeclarative(&Basic{
		Namespaced: true,
		Defaulter: func(obj runtime.Object) {
			if s := obj.(*corev1.Secret); s.Type == "" {
				s.Type = corev1.SecretTypeOpaque
			}
		},
		OnCreate:    func(obj runtime.Object) { foldStringData(obj.(*corev1.Secret)) },
		OnUpdate:    func(obj, _ runtime.Object) { foldStringData(obj.(*corev1.Secret)) },
		FieldLabels: registry.SupportedFieldLabels(nil, "type", "metadata.namespace", "metadata.name"),
		FieldsFunc: func(obj runtime.Object) map[string]string {
			s := obj.(*corev1.Secret)
			f := metaFields(s, true)
			f["type"] = string(s.Type)
			return f
		},
		Validator: func(obj runtime.Object) field.ErrorList { return validateSecret(obj.(*corev1.Secret)) },
		UpdateValidator: func(obj, old runtime.Object) field.ErrorList {
			s, o := obj.(*corev1.Secret), old.(*corev1.Secret)
			var errs field.ErrorList
			if s.Type != o.Type {
				errs = append(errs, field.Invalid(field.NewPath("type"), s.Type, "field is immutable"))
			}
			if o.Immutable != nil && *o.Immutable {
				const msg = "field is immutable when `immutable` is set"
				if s.Immutable == nil || !*s.Immutable {
					errs = append(errs, field.Forbidden(field.NewPath("immutable"), msg))
				}
				if !reflect.DeepEqual(s.Data, o.Data) {
					errs = append(errs, field.Forbidden(field.NewPath("data"), msg))
				}
			}
			errs = append(errs, metavalidation.ValidateObjectMeta(&s.ObjectMeta, true, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
			return append(errs, validateSecret(s)...)
		},
		CreateWarnings: func(obj runtime.Object) []string { return secretWarnings(obj.(*corev1.Secret)) },
		UpdateWarnings: func(obj, _ runtime.Object) []string { return secretWarnings(obj.(*corev1.Secret)) },
	}, ObjectMetaDeclarative)
}

// foldStringData is what the v1 conversion does to a written Secret:
// stringData's keys overwrite data's, and stringData is not kept.
func foldStringData(s *corev1.Secret) {
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	data := field.NewPath("data")
	size := 0
	for k, v := range s.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(data.Key(k), k, msg))
		}
		size += len(v)
	}
	if size > maxSecretSize {
		errs = append(errs, field.TooLong(data, "", maxSecretSize))
	}
	jsonKey := func(key string) {
		b, ok := s.Data[key]
		if !ok {
			errs = append(errs, field.Required(data.Key(key), ""))
			return
		}
		if err := json.Unmarshal(b, &map[string]any{}); err != nil {
			errs = append(errs, field.Invalid(data.Key(key), "<secret contents redacted>", err.Error()))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		jsonKey(corev1.DockerConfigKey)
	case corev1.SecretTypeDockerConfigJson:
		jsonKey(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			errs = append(errs, field.Required(data.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(data.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		if _, ok := s.Data[corev1.TLSCertKey]; !ok {
			errs = append(errs, field.Required(data.Key(corev1.TLSCertKey), ""))
		}
		if _, ok := s.Data[corev1.TLSPrivateKeyKey]; !ok {
			errs = append(errs, field.Required(data.Key(corev1.TLSPrivateKeyKey), ""))
		}
	}
	return errs
}

// secretWarnings: a TLS Secret whose certificate and key are no pair.
func secretWarnings(s *corev1.Secret) []string {
	if s.Type != corev1.SecretTypeTLS {
		return nil
	}
	if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		return []string{err.Error()}
	}
	return nil
}
