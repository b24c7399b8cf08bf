// Command validate runs the operator framework's own validators
// (github.com/operator-framework/api/pkg/validation) on an OLM bundle
// directory (manifests/ and metadata/), as operator-sdk bundle validate
// and the OperatorHub pipelines do, and prints every finding.
//
//	validate [-k8s-version 1.28] BUNDLE_DIR
//
// The suites: the default bundle validators (ClusterServiceVersion, CRDs,
// bundle), OperatorHub (v2, standard capabilities and categories), the
// OpenShift one (CommunityOperatorValidator: com.redhat.openshift.versions
// against removed APIs, with the bundle's Dockerfile as index-path), objects
// (PodDisruptionBudgets, SCCs, PriorityClasses), good practices and
// deprecated APIs. Not MultipleArchitecturesValidator: it pulls the image
// with docker, and these machines have neither a daemon nor a registry. Exit status 1 on any error, and on any warning
// not named with -allow-warning (a substring of its message).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

type allowList []string

func (a *allowList) String() string     { return strings.Join(*a, ",") }
func (a *allowList) Set(v string) error { *a = append(*a, v); return nil }

func main() {
	k8sVersion := flag.String("k8s-version", "1.28", "the oldest Kubernetes version the bundle supports")
	var allowed allowList
	flag.Var(&allowed, "allow-warning", "a warning to accept (substring of its message); repeatable")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: validate [-k8s-version 1.28] [-allow-warning TEXT]... BUNDLE_DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: cannot load the bundle in %s: %v\n", dir, err)
		os.Exit(1)
	}
	if bundle.CSV == nil {
		fmt.Fprintf(os.Stderr, "error: no ClusterServiceVersion in %s\n", dir)
		os.Exit(1)
	}
	suites := []struct {
		name       string
		validators interfaces.Validators
	}{
		{"default", validation.DefaultBundleValidators},
		{"operatorhub", interfaces.Validators{
			validation.OperatorHubV2Validator,
			validation.StandardCapabilitiesValidator,
			validation.StandardCategoriesValidator,
		}},
		{"openshift", interfaces.Validators{validation.CommunityOperatorValidator}},
		{"objects", interfaces.Validators{validation.ObjectValidator}},
		{"good-practices", interfaces.Validators{validation.GoodPracticesValidator}},
		{"deprecated-apis", interfaces.Validators{validation.AlphaDeprecatedAPIsValidator}},
	}
	optional := map[string]string{
		"k8s-version": *k8sVersion,
		"index-path":  filepath.Join(dir, "bundle.Dockerfile"),
	}
	objects := []interface{}{bundle, optional}
	for _, obj := range bundle.Objects {
		objects = append(objects, obj)
	}
	errorsFound, warningsFound := 0, 0
	for _, suite := range suites {
		results := suite.validators.Validate(objects...)
		findings := 0
		for _, result := range results {
			for _, e := range result.Errors {
				fmt.Printf("%s: error: %s\n", suite.name, describe(e))
				errorsFound++
				findings++
			}
			for _, w := range result.Warnings {
				if accepted(w, allowed) {
					fmt.Printf("%s: warning (accepted): %s\n", suite.name, describe(w))
					continue
				}
				fmt.Printf("%s: warning: %s\n", suite.name, describe(w))
				warningsFound++
				findings++
			}
		}
		if findings == 0 {
			fmt.Printf("%s: ok\n", suite.name)
		}
	}
	fmt.Printf("%s: %d errors, %d warnings\n", bundle.CSV.GetName(), errorsFound, warningsFound)
	if errorsFound+warningsFound > 0 {
		os.Exit(1)
	}
}

func describe(e errors.Error) string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%s)", e.Error(), e.Field)
	}
	return e.Error()
}

func accepted(w errors.Error, allowed allowList) bool {
	for _, a := range allowed {
		if strings.Contains(w.Error(), a) {
			return true
		}
	}
	return false
}
