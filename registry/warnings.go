package registry

import "context"

type warningSinkKey struct{}

// WithWarningSink returns a context whose writes send the warnings a
// strategy gives while it prepares an object (kube-apiserver's
// warning.AddWarning from PrepareForCreate, such as the pod strategy's
// deprecated AppArmor annotations) to add, in the order given. The API
// server adds them to the response before the kind's WarningsOnCreate.
func WithWarningSink(ctx context.Context, add func(text string)) context.Context {
	return context.WithValue(ctx, warningSinkKey{}, add)
}

// Warn sends a warning to the context's sink; without one it is dropped.
func Warn(ctx context.Context, text string) {
	if add, ok := ctx.Value(warningSinkKey{}).(func(string)); ok && add != nil && text != "" {
		add(text)
	}
}
