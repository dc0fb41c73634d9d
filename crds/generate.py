#!/usr/bin/env python3
"""Writes crds/tandem.dev_*.yaml, the CustomResourceDefinitions of the tandem.dev API.

The YAML files are what `kubectl apply -f crds/` and the Helm chart install, and what the tests
load; this script is how they are written, so that the pool schema shared by
ModelDeployment.spec.{prefill,decode} and ModelPool.spec is defined once (controller-gen's role
for Go operators). Edit the schema here, run `python3 crds/generate.py`, commit both.
`python3 crds/generate.py --check` exits 1 when the files are stale (tests/kube-sim runs it).
Field meanings: crds/README.md.
"""
import argparse
import os
import sys

import yaml

GROUP = "tandem.dev"
VERSION = "v1alpha1"
HERE = os.path.dirname(os.path.abspath(__file__))

# resource.Quantity as Kubernetes' own CRDs write it (int-or-string with the quantity grammar).
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
TENSOR_PARALLEL_SIZES = [1, 2, 4, 8, 16, 32, 64]


def obj(description, properties, required=None, rules=None, default=None):
    node = {"type": "object", "description": description, "properties": properties}
    if required:
        node["required"] = required
    if default is not None:
        node["default"] = default
    if rules:
        node["x-kubernetes-validations"] = [{"rule": r, "message": m} for r, m in rules]
    return node


def string(description, **kw):
    return {"type": "string", "description": description, **kw}


def int32(description, **kw):
    return {"type": "integer", "format": "int32", "description": description, **kw}


def boolean(description, default):
    return {"type": "boolean", "description": description, "default": default}


def immutable(node, field):
    node.setdefault("x-kubernetes-validations", []).append(
        {"rule": "self == oldSelf", "message": f"{field} is immutable"})
    return node


def quantity(description):
    return {"description": description, "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN, "x-kubernetes-int-or-string": True}


def resources():
    def quantities(what):
        return {"type": "object", "description": what,
                "additionalProperties": quantity("A resource.Quantity: 8, 500m, 64Gi.")}
    return obj("Compute resources per replica, in corev1.ResourceRequirements form (cpu, memory, "
               "nvidia.com/gpu, ...). GPU pools request nvidia.com/gpu equal to tensorParallel.",
               {"limits": quantities("Maximum amount of each resource."),
                "requests": quantities("Minimum amount of each resource; defaults to limits.")})


def model():
    volume = obj(
        "Where the checkpoint lives; mounted read-only into the pods at mountPath.",
        {"persistentVolumeClaim": obj("A PersistentVolumeClaim in the deployment's namespace.",
                                      {"claimName": string("The claim's name.", minLength=1,
                                                           maxLength=253),
                                       "readOnly": boolean("Mount the claim read-only.", True)},
                                      required=["claimName"]),
         "hostPath": obj("A directory on the node (single-node or pre-staged clusters).",
                         {"path": string("Absolute path on the node.", pattern="^/",
                                         maxLength=4096)},
                         required=["path"]),
         "mountPath": string("Where the volume appears in the containers.", default="/models",
                             pattern="^/", maxLength=4096)},
        rules=[("has(self.persistentVolumeClaim) != has(self.hostPath)",
                "volume needs exactly one of persistentVolumeClaim and hostPath")])
    dummy = immutable(obj(
        "Random weights of a named model shape instead of a checkpoint (tests, capacity planning).",
        {"preset": string("Model shape (engine/model/presets.h).",
                          enum=["tiny", "tiny-glm", "bench", "kimi-k2.6", "glm-5.2"]),
         "seed": {"type": "integer", "format": "int64", "minimum": 0, "default": 0,
                  "description": "Seed of the random weights; equal seeds give equal weights."}},
        required=["preset"]), "model.dummy")
    return obj(
        "The model served: a checkpoint (path, usually with volume) or dummy weights.",
        {"name": string("Served model name: the OpenAI API's `model` field "
                        "(e.g. moonshotai/Kimi-K2.6).", minLength=1, maxLength=253),
         "path": immutable(string("Checkpoint directory inside the container (config.json, "
                                  "*.safetensors, tokenizer). Immutable.",
                                  pattern="^/", maxLength=4096), "model.path"),
         "volume": volume,
         "dummy": dummy},
        required=["name"],
        rules=[("has(self.path) != has(self.dummy)",
                "set exactly one of model.path (a checkpoint) and model.dummy (random weights)"),
               ("!has(self.volume) || (has(self.path) && (self.path == self.volume.mountPath || "
                "self.path.startsWith(self.volume.mountPath.endsWith('/') ? "
                "self.volume.mountPath : self.volume.mountPath + '/')))",
                "model.path must lie under model.volume.mountPath"),
               ("has(self.dummy) == has(oldSelf.dummy)",
                "the model source (path or dummy) is immutable")])


def autoscaling():
    def number(description, **kw):
        return {"type": "number", "description": description, **kw}
    return obj(
        "Autoscaling of the pool (docs/autoscaling.md). mode builtin: tandem-controller's planner "
        "writes replicas from the pool's load; mode external: HPA, KEDA or another autoscaler "
        "does, through the ModelPool's scale subresource, and the built-in one stands aside.",
        {"enabled": boolean("Let an autoscaler change replicas (the ModelDeployment then only "
                            "seeds them).", False),
         "mode": string("Who writes replicas: builtin (tandem-controller) or external (HPA, "
                        "KEDA, ... through the scale subresource).",
                        enum=["builtin", "external"], default="builtin"),
         "minReplicas": int32("Fewest replicas.", minimum=1, default=1),
         "maxReplicas": int32("Most replicas; required when enabled in builtin mode.", minimum=1),
         "targetKvCacheUsage": number("Decode: the mean KV cache usage ratio "
                                      "(tandem_kv_cache_usage_ratio) to hold.",
                                      minimum=0, exclusiveMinimum=True, maximum=1, default=0.8),
         "targetWaitingRequestsPerReplica": int32(
             "Decode: queued requests per ready replica (tandem_requests_waiting) to hold; 0 "
             "turns the signal off.", minimum=0, default=4),
         "targetWaitingPrefillTokensPerReplica": int32(
             "Prefill: prompt tokens queued for prefill per ready replica to hold; 0 turns the "
             "signal off.", minimum=0, default=8192),
         "targetTTFTSeconds": number("Prefill: p95 time to first token to hold, in seconds; "
                                     "unset: not a signal.", minimum=0, exclusiveMinimum=True),
         "targetITLSeconds": number("Decode: p95 inter-token latency to hold, in seconds; unset: "
                                    "not a signal.", minimum=0, exclusiveMinimum=True),
         "scaleUpDelaySeconds": int32("Scale-up stabilization window: every recommendation of "
                                      "this many seconds must be above the current size.",
                                      minimum=0, default=30),
         "scaleDownDelaySeconds": int32("Scale-down stabilization window: how long the load "
                                        "must stay low before a replica is drained and removed.",
                                        minimum=0, default=300),
         "maxScaleUpStep": int32("Most replicas one decision adds.", minimum=1, default=4),
         "maxScaleDownStep": int32("Most replicas one decision removes.", minimum=1, default=1)},
        rules=[("!self.enabled || (has(self.mode) && self.mode == 'external') || "
                "has(self.maxReplicas)",
                "autoscaling.maxReplicas is required when autoscaling is enabled in builtin mode"),
               ("!has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
                "autoscaling.minReplicas must not exceed autoscaling.maxReplicas")])


def rollout():
    def number(description, **kw):
        return {"type": "number", "description": description, **kw}
    return obj(
        "How precision changes roll out (docs/eval.md, Quality gate).",
        {"qualityGate": obj(
            "When a pool's weights or kvCache change, run a tool-calling suite against a canary "
            "of the new configuration (<name>-gate: one replica of each pool and a router) and "
            "promote it only when it passes; otherwise the pools keep their precision and "
            "status.rollout says why.",
            {"suite": string("Absolute path of a suite file (JSONL, `tandem eval tools` format) "
                             "inside model.volume.", minLength=2, maxLength=1024),
             "minValidity": number("Lowest tool-call validity (0-1) the new configuration may "
                                   "have.", minimum=0, maximum=1, default=0.95),
             "maxValidityDrop": number("Most points of validity the new configuration may lose "
                                       "against the current one.", minimum=0, maximum=100,
                                       default=0.5),
             "cases": int32("Run the suite's first N cases; 0: all of them.", minimum=0,
                            default=0),
             "maxTokens": int32("Largest answer per case, in tokens.", minimum=1, maximum=65536,
                                default=256)},
            required=["suite"])})


def integrity():
    return obj("KV page integrity (ARCHITECTURE.md, Integrity).",
               {"pageTags": boolean("Per-page generation tags checked before every decode step.",
                                    True),
                "transferChecksum": boolean("Digest over transferred KV bytes, checked before "
                                            "the first token.", True)},
               default={})


def tls():
    return obj("Mutual TLS between the agents (every gRPC hop: router to prefill and decode, "
               "prefill to decode). The Secret is a kubernetes.io/tls Secret with tls.crt, tls.key "
               "and ca.crt (what cert-manager issues), mounted read-only in every agent pod and "
               "re-read when it rotates; agents then refuse plaintext and peers whose certificate "
               "another CA signed. Unset: plaintext between the agents.",
               {"secretName": string("The Secret with tls.crt, tls.key and ca.crt.", minLength=1,
                                     maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
                "serverName": string("The DNS name (SAN) every agent certificate carries; callers "
                                     "check it whatever pod address they dial.",
                                     default="tandem-agent", minLength=1, maxLength=253,
                                     pattern=DNS_SUBDOMAIN_PATTERN)},
               required=["secretName"])


def image_fields():
    return {
        "image": string("tandem-agent container image; the controller's --agent-image when "
                        "unset.", minLength=1, maxLength=1024),
        "imagePullPolicy": string("corev1 pull policy.", enum=["Always", "IfNotPresent", "Never"]),
        "imagePullSecrets": {"type": "array", "maxItems": 16,
                             "description": "Secrets (by name, never copied) for the registry.",
                             "items": obj("A Secret in the same namespace.",
                                          {"name": string("Secret name.", minLength=1,
                                                          maxLength=253)},
                                          required=["name"])},
    }


POOL_AUTOSCALING_RULE = (
    "!has(self.autoscaling) || !self.autoscaling.enabled "
    "|| (has(self.autoscaling.mode) && self.autoscaling.mode == 'external') "
    "|| !has(self.autoscaling.maxReplicas) "
    "|| (self.replicas >= self.autoscaling.minReplicas && "
    "self.replicas <= self.autoscaling.maxReplicas)",
    "replicas must lie within autoscaling.minReplicas..autoscaling.maxReplicas while "
    "autoscaling is enabled in builtin mode")


def pool_fields():
    """The fields a pool has both in ModelDeployment.spec.{prefill,decode} and ModelPool.spec."""
    return {
        "replicas": int32("Agent replicas (pods) in the pool; each holds tensorParallel GPUs.",
                          minimum=0, default=1),
        "tensorParallel": {**int32("GPUs per replica (tensor parallel degree), a power of two.",
                                   minimum=1, maximum=64, default=1),
                           "x-kubernetes-validations": [{
                               "rule": "self in " + str(TENSOR_PARALLEL_SIZES),
                               "message": "tensorParallel must be a power of two from 1 to 64"}]},
        "weights": string("Weight precision: bf16, fp8 (e4m3, 128x128 block scales) or int4 "
                          "(compressed-tensors pack-quantized, routed experts only).",
                          enum=["bf16", "fp8", "int4"], default="bf16"),
        "kvCache": string("KV cache dtype: bf16, or fp8_e4m3 (half the bytes per token).",
                          enum=["bf16", "fp8_e4m3"], default="bf16"),
        "kvCacheMemory": {**quantity("KV cache bytes per replica (e.g. 40Gi); unset: what is "
                                     "left after the weights."),
                          "x-kubernetes-validations": [{
                              "rule": "!string(self).startsWith('-')",
                              "message": "kvCacheMemory must not be negative"}]},
        "resources": resources(),
        "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"},
                         "description": "Node labels the pool's pods must match."},
        "autoscaling": autoscaling(),
        "terminationGracePeriodSeconds": int32(
            "Seconds a leaving pod has to drain: its preStop hook (GET /drain) stops new work and "
            "turns it not-ready, in-flight requests finish within this less 5 s (the agent's "
            "shutdownGraceMs), then SIGTERM stops it.", minimum=6, maximum=3600, default=60),
    }


def pool_spec(description):
    return obj(description, pool_fields(), default={}, rules=[POOL_AUTOSCALING_RULE])


def condition_list():
    return {
        "type": "array",
        "description": "metav1.Condition list, one per type: Ready, Progressing, Degraded.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "maxItems": 16,
        "items": obj("One condition (metav1.Condition).", {
            "type": string("Ready, Progressing or Degraded.", minLength=1, maxLength=316),
            "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                                   "description": "metadata.generation the condition is for."},
            "lastTransitionTime": string("When status last changed.", format="date-time"),
            "reason": string("CamelCase cause, e.g. PodsNotReady, InsufficientCapacity, "
                             "InvalidSpec.", minLength=1, maxLength=1024,
                             pattern="^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
            "message": string("Human-readable detail.", maxLength=32768),
        }, required=["type", "status", "lastTransitionTime", "reason", "message"]),
    }


def pool_status(description):
    return obj(description, {
        "replicas": int32("Pods that exist.", minimum=0),
        "readyReplicas": int32("Pods that are ready.", minimum=0),
        "ready": string("readyReplicas/desired replicas, e.g. 2/2 (printer column)."),
    })


def age_column():
    return {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def crd(kind, plural, short, spec, status, columns, scale=None, root_rules=None):
    subresources = {"status": {}}
    if scale:
        subresources["scale"] = scale
    root = obj(f"{kind} ({GROUP}/{VERSION}).", {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object"}, "spec": spec, "status": status},
        required=["spec"], rules=root_rules)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower(), "shortNames": [short], "categories": ["tandem"]},
            "scope": "Namespaced",
            "versions": [{"name": VERSION, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": root},
                          "subresources": subresources,
                          "additionalPrinterColumns": columns + [age_column()]}],
        },
    }


def model_deployment():
    spec = obj(
        "A model served by a prefill pool and a decode pool behind a router.",
        {"model": model(),
         "router": obj("The OpenAI-compatible HTTP front end (a Deployment + Service).", {
             "replicas": int32("Router pods.", minimum=0, default=1),
             "port": int32("Service and container port of the OpenAI API.", minimum=1,
                           maximum=65535, default=8000),
             "auth": obj("Client authentication.", {
                 "apiKeySecret": obj(
                     "Secret holding the accepted API keys, referenced by name and mounted, "
                     "never copied.",
                     {"name": string("Secret name.", minLength=1, maxLength=253,
                                     pattern=DNS_SUBDOMAIN_PATTERN),
                      "key": string("Key in the Secret.", minLength=1, maxLength=253,
                                    default="api-key")},
                     required=["name"])}),
             "unknownToolCalls": string(
                 "A tool call the model writes naming a function the request did not offer: drop "
                 "it from the response (counted in tandem_tool_calls_dropped_total) or forward it "
                 "to the client.", enum=["drop", "forward"], default="drop"),
             "resources": resources()}, default={}),
         "prefill": pool_spec("The prefill pool (ModelPool <name>-prefill)."),
         "decode": pool_spec("The decode pool (ModelPool <name>-decode)."),
         "integrity": integrity(),
         "tls": tls(),
         "rollout": rollout(),
         "gpuBudget": int32("GPUs both pools may hold together (replicas x GPUs per pod, "
                            "summed): the built-in autoscaler adds no replica past it. Unset: "
                            "no cap. Lowering it removes nothing.", minimum=0),
         **image_fields()},
        required=["model"],
        rules=[("self.prefill.kvCache == 'bf16' || self.decode.kvCache == 'fp8_e4m3'",
                "prefill.kvCache fp8_e4m3 needs decode.kvCache fp8_e4m3: pages cross over in "
                "the decode pool's dtype, so an FP8 prefill cache widened to BF16 would lose "
                "precision and save nothing")])
    status = obj("Observed state, written by tandem-controller.", {
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                               "description": "metadata.generation last reconciled."},
        "conditions": condition_list(),
        "prefill": pool_status("The prefill pool's replicas."),
        "decode": pool_status("The decode pool's replicas."),
        "router": pool_status("The router's replicas."),
        "precision": string("weights/KV of each pool, e.g. "
                            "`prefill=fp8/bf16 decode=int4/fp8_e4m3` (printer column)."),
        "rollout": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                    "description": "The quality gate's last evaluation: phase (Evaluating, "
                                   "Promoted, Refused), target and from precisions, reason, "
                                   "message, figures (baseline and candidate validity, calls, "
                                   "cases), startTime, completionTime."},
    })
    columns = [
        {"name": "Ready", "type": "string",
         "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Prefill", "type": "string", "jsonPath": ".status.prefill.ready",
         "description": "Ready/desired prefill replicas."},
        {"name": "Decode", "type": "string", "jsonPath": ".status.decode.ready",
         "description": "Ready/desired decode replicas."},
        {"name": "Precision", "type": "string", "jsonPath": ".status.precision",
         "description": "Weights/KV cache dtype of each pool."},
    ]
    root_rules = [("!has(self.metadata.name) || size(self.metadata.name) <= 44",
                   "metadata.name must be at most 44 characters so that <name>-prefill "
                   "(ModelPool, StatefulSet) stays within 52"),
                  ("!has(self.metadata.name) || !has(self.spec.rollout) || "
                   "!has(self.spec.rollout.qualityGate) || size(self.metadata.name) <= 39",
                   "with spec.rollout.qualityGate, metadata.name must be at most 39 characters "
                   "so that the canary's <name>-gate-prefill stays within 52")]
    return crd("ModelDeployment", "modeldeployments", "mdep", spec, status, columns,
               root_rules=root_rules)


def model_pool():
    fields = pool_fields()
    spec = obj(
        "One pool of agents (a StatefulSet + headless Service), owned by a ModelDeployment.",
        {"deploymentName": immutable(string("The owning ModelDeployment.", minLength=1,
                                            maxLength=253, pattern=DNS_SUBDOMAIN_PATTERN),
                                     "deploymentName"),
         "role": immutable(string("What the pool's agents do.", enum=["prefill", "decode"]),
                           "role"),
         **fields,
         "model": model(),
         "integrity": integrity(),
         "tls": tls(),
         **image_fields()},
        required=["deploymentName", "role", "model"],
        rules=[POOL_AUTOSCALING_RULE])
    status = obj("Observed state, written by tandem-controller.", {
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                               "description": "metadata.generation last reconciled."},
        "replicas": int32("Pods that exist (scale subresource statusReplicasPath).", minimum=0),
        "readyReplicas": int32("Pods that are ready.", minimum=0),
        "selector": string("Label selector of the pool's pods, in string form (scale "
                           "subresource labelSelectorPath, for HPA/KEDA)."),
        "conditions": condition_list(),
        "autoscaler": obj("The built-in autoscaler's view of the pool (autoscaling.enabled, mode "
                          "builtin); absent otherwise.", {
            "recommendedReplicas": int32("What the load signals recommend before the stabilization "
                                         "windows, step limits and guards.", minimum=0),
            "reason": string("Why the last evaluation moved or held the pool (CamelCase: "
                             "KvCacheAboveTarget, Stabilizing, PendingReplicas, NoSignals, AtMax, "
                             "GpuBudget, ...)."),
            "lastScale": obj("The last change the autoscaler made to spec.replicas.", {
                "time": string("When.", format="date-time"),
                "direction": string("up or down.", enum=["up", "down"]),
                "from": int32("spec.replicas before.", minimum=0),
                "to": int32("spec.replicas after.", minimum=0),
                "reason": string("The signal or bound that moved it (CamelCase)."),
                "message": string("The signal, its value and target, for people."),
            }),
        }),
    })
    columns = [
        {"name": "Role", "type": "string", "jsonPath": ".spec.role"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Weights", "type": "string", "jsonPath": ".spec.weights"},
        {"name": "KV", "type": "string", "jsonPath": ".spec.kvCache"},
    ]
    scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
             "labelSelectorPath": ".status.selector"}
    return crd("ModelPool", "modelpools", "mpool", spec, status, columns, scale=scale)


HEADER = ("# Generated by crds/generate.py: edit that, run it, commit both. Field guide: "
          "crds/README.md.\n")


def render(doc):
    return HEADER + "---\n" + yaml.safe_dump(doc, sort_keys=False, width=100,
                                             default_flow_style=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args()
    stale = []
    for doc in (model_deployment(), model_pool()):
        path = os.path.join(HERE, f"{GROUP}_{doc['spec']['names']['plural']}.yaml")
        text = render(doc)
        current = open(path).read() if os.path.exists(path) else None
        if current == text:
            continue
        if args.check:
            stale.append(path)
        else:
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote {path}")
    if stale:
        print("stale (run python3 crds/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
