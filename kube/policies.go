package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressd/egressd/policy"
)

// Condition written on every EgressPolicy.
const (
	ConditionAccepted = "Accepted"
	ReasonValid       = "Valid"
	// ReasonInvalid: the object fails policy.Validate and no earlier version
	// of it was ever accepted; it allows nothing.
	ReasonInvalid = "Invalid"
	// ReasonInvalidPreviousInForce: the object fails validation; its last
	// accepted generation stays in force (an invalid edit never fails open
	// nor drops a working policy).
	ReasonInvalidPreviousInForce = "InvalidPreviousInForce"
)

// maxMessage bounds the condition message (the CRD allows 32768).
const maxMessage = 4096

type statusUpdate struct {
	obj  *unstructured.Unstructured
	cond metav1.Condition
}

// syncPolicies validates every EgressPolicy alone, compiles the good ones
// (or their last good version) into one snapshot, hands it over when the
// set changed, then writes the Accepted conditions that are out of date.
func (c *Controller) syncPolicies(ctx context.Context) error {
	objs := c.egps.GetStore().List()
	us := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			us = append(us, u)
		}
	}
	slices.SortFunc(us, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })

	seen := make(map[types.UID]bool, len(us))
	var docs []policy.Document
	var fp strings.Builder
	var updates []statusUpdate
	// New good versions become lastGood only once a snapshot holding them
	// is in force: a version that never took effect must not be the
	// fallback for a later invalid edit.
	staged := make(map[types.UID]goodVersion)
	for _, u := range us {
		uid, gen := u.GetUID(), u.GetGeneration()
		seen[uid] = true
		origin := "EgressPolicy " + u.GetNamespace() + "/" + u.GetName()
		var ep policy.EgressPolicy
		err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ep)
		if err != nil {
			err = fmt.Errorf("kube: %s: decode: %w", origin, err)
		} else {
			err = policy.ValidateWith(policy.Document{Origin: origin, Policy: ep}, c.cfg.PolicyOptions)
		}
		cond := metav1.Condition{Type: ConditionAccepted, ObservedGeneration: gen}
		switch prev, hadGood := c.lastGood[uid]; {
		case err == nil:
			ep.Status = policy.EgressPolicyStatus{} // status is ours, not part of the policy
			doc := policy.Document{Origin: origin, Policy: ep}
			staged[uid] = goodVersion{generation: gen, doc: doc}
			docs = append(docs, doc)
			fmt.Fprintf(&fp, "%s/%d;", uid, gen)
			cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonValid, "the policy is in force"
		case hadGood:
			docs = append(docs, prev.doc)
			fmt.Fprintf(&fp, "%s/%d;", uid, prev.generation)
			cond.Status, cond.Reason = metav1.ConditionFalse, ReasonInvalidPreviousInForce
			cond.Message = truncate(err.Error() + "; generation " + strconv.FormatInt(prev.generation, 10) + " stays in force")
		default:
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalid, truncate(err.Error())
		}
		if needsStatus(ep.Status, cond) {
			if err != nil {
				// Counted and logged once per rejected version, not on every resync.
				c.cfg.Metrics.ReloadErrors.WithLabelValues("kube").Inc()
				c.cfg.Logger.Warn("kube: invalid EgressPolicy", "policy", origin, "err", err, "reason", cond.Reason)
			}
			updates = append(updates, statusUpdate{obj: u, cond: cond})
		}
	}
	for uid := range c.lastGood {
		if !seen[uid] {
			delete(c.lastGood, uid) // deleted objects leave the snapshot
		}
	}

	if fp.String() != c.applied || !c.policiesDone.Load() {
		snap, err := policy.CompileWith(docs, c.cfg.PolicyOptions)
		if err != nil {
			// Each document passed Validate alone; a failure here is a
			// conflict between them. The previous snapshot stays in force.
			c.cfg.Metrics.ReloadErrors.WithLabelValues("kube").Inc()
			c.cfg.Logger.Error("kube: compile EgressPolicies; the previous snapshot stays in force", "err", err)
		} else {
			c.cfg.SetPolicy(snap)
			maps.Copy(c.lastGood, staged)
			c.applied = fp.String()
			c.cfg.Metrics.Reloads.WithLabelValues("kube").Inc()
			c.cfg.Metrics.Policies.Set(float64(len(docs)))
			c.cfg.Logger.Info("kube: policy snapshot updated", "policies", len(docs))
		}
		c.policiesDone.Store(true)
	} else {
		maps.Copy(c.lastGood, staged) // the same versions are in force already
	}

	var errs []error
	for _, su := range updates {
		if err := c.writeStatus(ctx, su); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// needsStatus reports whether the object's status differs from what would
// be written (so that a status write, which is itself an update event, does
// not cause another).
func needsStatus(st policy.EgressPolicyStatus, want metav1.Condition) bool {
	if st.ObservedGeneration != want.ObservedGeneration {
		return true
	}
	got := meta.FindStatusCondition(st.Conditions, want.Type)
	return got == nil || got.Status != want.Status || got.Reason != want.Reason ||
		got.Message != want.Message || got.ObservedGeneration != want.ObservedGeneration
}

func (c *Controller) writeStatus(ctx context.Context, su statusUpdate) error {
	res := c.cfg.Client.EgressPolicies(su.obj.GetNamespace())
	// The cache can lag behind our own last write; read the object fresh so
	// that a write already made is not made again (it would move
	// lastTransitionTime) and the update carries the current resourceVersion.
	u, err := res.Get(ctx, su.obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("kube: read EgressPolicy %s/%s: %w", su.obj.GetNamespace(), su.obj.GetName(), err)
	}
	if u.GetGeneration() != su.cond.ObservedGeneration {
		return nil // changed meanwhile: its own event brings the next sync
	}
	var fresh policy.EgressPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &fresh); err != nil {
		return fmt.Errorf("kube: decode EgressPolicy %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	if !needsStatus(fresh.Status, su.cond) {
		return nil
	}
	st := fresh.Status
	st.Conditions = slices.Clone(fresh.Status.Conditions)
	st.ObservedGeneration = su.cond.ObservedGeneration
	meta.SetStatusCondition(&st.Conditions, su.cond) // keeps lastTransitionTime if the status is unchanged
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return fmt.Errorf("kube: status of %s: %w", u.GetName(), err)
	}
	if err := unstructured.SetNestedField(u.Object, m, "status"); err != nil {
		return fmt.Errorf("kube: status of %s: %w", u.GetName(), err)
	}
	// Update, not patch: the resourceVersion turns a race with another
	// writer into a conflict, retried by the queue.
	_, err = res.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kube: write status of EgressPolicy %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
