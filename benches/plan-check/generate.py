#!/usr/bin/env python3
"""Writes a synthetic but realistic `terraform show -json` plan for the plan-check benchmark.

Why synthetic: a real plan of 15,000 resources needs real infrastructure. This one
keeps the shapes of real plans (format_version 1.2, compact JSON as Terraform prints
it, planned_values, prior_state, resource_changes, resource_drift, configuration,
relevant_attributes) with the proportions of a big fleet of workspaces:

- a module `workspace` instantiated with for_each over 500 workspace keys, 30
  resources each (docker, aws, random, local resources: volumes, containers, EBS
  disks, instances, security group rules, S3 objects, ...), so addresses look like
  `module.workspace["ws-0042"].docker_volume.home`;
- an `abode_protect.home` annotation inside the module whose resource_id references
  `docker_volume.home.id`, so every workspace's home volume is protected;
- actions: mostly no-op and update, some replace (delete-then-create and
  create-before-destroy, with replace_paths), deletes (count index, each key,
  removed block), creates, reads of data sources, a few forgets;
- sensitive values (passwords, tokens) marked in before_sensitive / after_sensitive,
  unknown values in after_unknown, drift for some resources.

The output is deterministic for given arguments (a seeded PRNG).

Usage: generate.py [--workspaces 500] [--tags 3] OUTPUT   (defaults: 15,000 resources, about 55 MB)
"""

import argparse
import json
import random

DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

PROVIDERS = {
    "docker": "registry.terraform.io/kreuzwerker/docker",
    "aws": "registry.terraform.io/hashicorp/aws",
    "random": "registry.terraform.io/hashicorp/random",
    "local": "registry.terraform.io/hashicorp/local",
    "abode": "registry.terraform.io/abode/abode",
}

# (type, name, instance keys (None: single, int: count, list: for_each), provider)
KINDS = [
    ("docker_volume", "home", None, "docker"),
    ("docker_container", "workspace", 1, "docker"),
    ("docker_image", "main", None, "docker"),
    ("docker_network", "ws", None, "docker"),
    ("aws_ebs_volume", "data", 4, "aws"),
    ("aws_instance", "dev", None, "aws"),
    ("aws_security_group_rule", "ingress", ["22", "443", "80", "8080"], "aws"),
    ("aws_iam_role_policy_attachment", "extra", 5, "aws"),
    ("aws_route53_record", "ws", None, "aws"),
    ("random_password", "db", None, "random"),
    ("local_file", "config", 3, "local"),
    ("aws_cloudwatch_log_group", "ws", None, "aws"),
    ("aws_s3_object", "dotfiles", [".bashrc", ".gitconfig", ".profile", ".vimrc", ".zshrc"], "aws"),
    ("abode_protect", "home", None, "abode"),
]


class Fleet:
    def __init__(self, rng: random.Random, tags: int):
        self.rng = rng
        self.tags = tags

    def hexid(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def uuid(self) -> str:
        h = self.hexid(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def tag_map(self, ws: str, kind: str) -> dict:
        tags = {
            "abode.workspace": ws,
            "abode.owner": f"user-{ws[3:]}@example.com",
            "abode.template": "docker-aws-dev",
            "abode.template_version": "v14",
            "cost-center": f"cc-{self.rng.randint(1000, 9999)}",
            "managed-by": "terraform",
            "kind": kind,
        }
        for i in range(self.tags):
            tags[f"team.label-{i}"] = f"value-{self.hexid(12)}"
        return tags

    def values(self, rtype: str, ws: str, key) -> tuple[dict, dict]:
        """Returns (values, sensitive marks) of one instance as refreshed from the provider."""
        rng = self.rng
        sensitive: dict = {}
        region = "eu-west-1"
        arn_base = f"arn:aws:iam::{rng.randint(10**11, 10**12 - 1)}"
        if rtype == "docker_volume":
            v = {
                "id": f"{ws}-home",
                "name": f"{ws}-home",
                "driver": "local",
                "driver_opts": {"type": "none", "o": "bind", "device": f"/srv/volumes/{ws}"},
                "labels": [{"label": k, "value": val} for k, val in self.tag_map(ws, "volume").items()],
                "mountpoint": f"/var/lib/docker/volumes/{ws}-home/_data",
            }
            sensitive = {"driver_opts": {}, "labels": [{} for _ in v["labels"]]}
        elif rtype == "docker_container":
            v = {
                "id": self.hexid(64),
                "name": f"{ws}-main",
                "image": f"sha256:{self.hexid(64)}",
                "hostname": ws,
                "entrypoint": ["sh", "-c", "exec /opt/abode/agent"],
                "env": [f"ABODE_AGENT_TOKEN={self.uuid()}", f"ABODE_WORKSPACE={ws}", "LANG=C.UTF-8"],
                "command": [],
                "restart": "unless-stopped",
                "memory": 4096,
                "cpu_shares": 1024,
                "must_run": True,
                "network_mode": "bridge",
                "ipc_mode": "private",
                "log_driver": "json-file",
                "exit_code": None,
                "user": "1000:1000",
                "working_dir": "/home/coder",
                "volumes": [
                    {
                        "container_path": "/home/coder",
                        "volume_name": f"{ws}-home",
                        "read_only": False,
                        "host_path": "",
                        "from_container": "",
                    }
                ],
                "labels": [{"label": k, "value": val} for k, val in self.tag_map(ws, "container").items()],
                "network_data": [
                    {
                        "gateway": "172.17.0.1",
                        "ip_address": f"172.17.{rng.randint(0, 255)}.{rng.randint(2, 254)}",
                        "ip_prefix_length": 16,
                        "network_name": "bridge",
                        "mac_address": ":".join(self.hexid(2) for _ in range(6)),
                    }
                ],
            }
            sensitive = {"env": True, "labels": [{} for _ in v["labels"]], "volumes": [{}], "network_data": [{}]}
        elif rtype == "docker_image":
            v = {
                "id": f"sha256:{self.hexid(64)}codercom/enterprise-base:ubuntu",
                "name": "codercom/enterprise-base:ubuntu",
                "image_id": f"sha256:{self.hexid(64)}",
                "repo_digest": f"codercom/enterprise-base@sha256:{self.hexid(64)}",
                "keep_locally": True,
                "pull_triggers": None,
                "platform": "linux/amd64",
                "triggers": None,
            }
        elif rtype == "docker_network":
            v = {
                "id": self.hexid(64),
                "name": f"{ws}-net",
                "driver": "bridge",
                "internal": False,
                "attachable": True,
                "ipam_driver": "default",
                "ipam_config": [{"subnet": f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.0/24", "gateway": "", "ip_range": "", "aux_address": {}}],
                "options": {"com.docker.network.bridge.enable_icc": "true"},
                "scope": "local",
            }
            sensitive = {"ipam_config": [{"aux_address": {}}], "options": {}}
        elif rtype == "aws_ebs_volume":
            v = {
                "id": f"vol-{self.hexid(17)}",
                "arn": f"arn:aws:ec2:{region}:{rng.randint(10**11, 10**12 - 1)}:volume/vol-{self.hexid(17)}",
                "availability_zone": f"{region}{rng.choice('abc')}",
                "encrypted": True,
                "final_snapshot": False,
                "iops": 3000,
                "kms_key_id": f"arn:aws:kms:{region}:123456789012:key/{self.uuid()}",
                "multi_attach_enabled": False,
                "outpost_arn": "",
                "size": rng.choice([20, 50, 100, 200]),
                "snapshot_id": "",
                "tags": self.tag_map(ws, "data-disk"),
                "tags_all": self.tag_map(ws, "data-disk"),
                "throughput": 125,
                "timeouts": None,
                "type": "gp3",
            }
            sensitive = {"tags": {}, "tags_all": {}}
        elif rtype == "aws_instance":
            v = {
                "id": f"i-{self.hexid(17)}",
                "ami": f"ami-{self.hexid(17)}",
                "arn": f"arn:aws:ec2:{region}:123456789012:instance/i-{self.hexid(17)}",
                "associate_public_ip_address": False,
                "availability_zone": f"{region}a",
                "cpu_core_count": 2,
                "cpu_threads_per_core": 2,
                "disable_api_stop": False,
                "disable_api_termination": False,
                "ebs_optimized": True,
                "get_password_data": False,
                "hibernation": False,
                "iam_instance_profile": f"{ws}-profile",
                "instance_initiated_shutdown_behavior": "stop",
                "instance_state": "running",
                "instance_type": rng.choice(["t3.large", "m6i.xlarge", "c6i.2xlarge"]),
                "ipv6_address_count": 0,
                "ipv6_addresses": [],
                "key_name": "",
                "monitoring": False,
                "placement_group": "",
                "primary_network_interface_id": f"eni-{self.hexid(17)}",
                "private_dns": f"ip-10-0-{rng.randint(0, 255)}-{rng.randint(0, 255)}.{region}.compute.internal",
                "private_ip": f"10.0.{rng.randint(0, 255)}.{rng.randint(0, 255)}",
                "public_dns": "",
                "public_ip": "",
                "root_block_device": [
                    {
                        "delete_on_termination": True,
                        "device_name": "/dev/xvda",
                        "encrypted": True,
                        "iops": 3000,
                        "kms_key_id": "",
                        "tags": {},
                        "throughput": 125,
                        "volume_id": f"vol-{self.hexid(17)}",
                        "volume_size": 30,
                        "volume_type": "gp3",
                    }
                ],
                "security_groups": [],
                "source_dest_check": True,
                "subnet_id": f"subnet-{self.hexid(17)}",
                "tags": self.tag_map(ws, "instance"),
                "tags_all": self.tag_map(ws, "instance"),
                "tenancy": "default",
                "user_data": self.hexid(40),
                "user_data_replace_on_change": False,
                "vpc_security_group_ids": [f"sg-{self.hexid(17)}"],
                "metadata_options": [{"http_endpoint": "enabled", "http_tokens": "required", "http_put_response_hop_limit": 1, "instance_metadata_tags": "disabled"}],
            }
            sensitive = {"ipv6_addresses": [], "root_block_device": [{"tags": {}}], "security_groups": [], "tags": {}, "tags_all": {}, "vpc_security_group_ids": [False], "metadata_options": [{}]}
        elif rtype == "aws_security_group_rule":
            v = {
                "id": f"sgrule-{rng.randint(10**9, 10**10 - 1)}",
                "type": "ingress",
                "cidr_blocks": ["10.0.0.0/8"],
                "description": f"port {key} for {ws}",
                "from_port": int(key),
                "to_port": int(key),
                "protocol": "tcp",
                "security_group_id": f"sg-{self.hexid(17)}",
                "security_group_rule_id": f"sgr-{self.hexid(17)}",
                "self": False,
                "source_security_group_id": None,
                "ipv6_cidr_blocks": None,
                "prefix_list_ids": None,
            }
            sensitive = {"cidr_blocks": [False]}
        elif rtype == "aws_iam_role_policy_attachment":
            v = {
                "id": f"{ws}-role-{self.hexid(20)}",
                "role": f"{ws}-role",
                "policy_arn": f"{arn_base}:policy/workspace-{key}",
            }
        elif rtype == "aws_route53_record":
            v = {
                "id": f"Z{self.hexid(13).upper()}_{ws}.dev.example.com_A",
                "allow_overwrite": None,
                "fqdn": f"{ws}.dev.example.com",
                "name": f"{ws}.dev.example.com",
                "records": [f"10.0.{rng.randint(0, 255)}.{rng.randint(0, 255)}"],
                "ttl": 300,
                "type": "A",
                "zone_id": f"Z{self.hexid(13).upper()}",
                "alias": [],
                "health_check_id": "",
                "set_identifier": "",
            }
            sensitive = {"alias": [], "records": [False]}
        elif rtype == "random_password":
            v = {
                "id": "none",
                "bcrypt_hash": f"$2a$10${self.hexid(53)}",
                "keepers": None,
                "length": 32,
                "lower": True,
                "min_lower": 0,
                "min_numeric": 0,
                "min_special": 0,
                "min_upper": 0,
                "number": True,
                "numeric": True,
                "override_special": None,
                "result": f"pw-{self.hexid(29)}",
                "special": False,
                "upper": True,
            }
            sensitive = {"bcrypt_hash": True, "result": True}
        elif rtype == "local_file":
            content = f"# workspace {ws} settings {key}\n" + "".join(
                f"setting_{i} = \"{self.hexid(16)}\"\n" for i in range(8)
            )
            v = {
                "id": self.hexid(40),
                "content": content,
                "content_base64": None,
                "content_base64sha256": self.hexid(43) + "=",
                "content_base64sha512": self.hexid(86) + "==",
                "content_md5": self.hexid(32),
                "content_sha1": self.hexid(40),
                "content_sha256": self.hexid(64),
                "content_sha512": self.hexid(128),
                "directory_permission": "0777",
                "file_permission": "0600",
                "filename": f"/srv/abode/{ws}/config-{key}.toml",
                "sensitive_content": None,
                "source": None,
            }
            sensitive = {"sensitive_content": True}
        elif rtype == "aws_cloudwatch_log_group":
            v = {
                "id": f"/abode/{ws}",
                "arn": f"arn:aws:logs:{region}:123456789012:log-group:/abode/{ws}",
                "kms_key_id": "",
                "log_group_class": "STANDARD",
                "name": f"/abode/{ws}",
                "name_prefix": "",
                "retention_in_days": 30,
                "skip_destroy": False,
                "tags": self.tag_map(ws, "logs"),
                "tags_all": self.tag_map(ws, "logs"),
            }
            sensitive = {"tags": {}, "tags_all": {}}
        elif rtype == "aws_s3_object":
            v = {
                "id": f"dotfiles/{ws}/{key}",
                "acl": None,
                "bucket": "abode-dotfiles",
                "bucket_key_enabled": False,
                "cache_control": "",
                "content_type": "text/plain",
                "etag": self.hexid(32),
                "key": f"dotfiles/{ws}/{key}",
                "kms_key_id": None,
                "server_side_encryption": "AES256",
                "source": f"dotfiles/{key}",
                "source_hash": None,
                "storage_class": "STANDARD",
                "tags": self.tag_map(ws, "dotfile"),
                "tags_all": self.tag_map(ws, "dotfile"),
                "version_id": self.hexid(32),
            }
            sensitive = {"tags": {}, "tags_all": {}}
        elif rtype == "abode_protect":
            v = {"id": self.uuid(), "resource_id": f"{ws}-home", "mode": "confirm"}
        else:
            raise ValueError(rtype)
        return v, sensitive


def instance_suffix(key) -> str:
    if key is None:
        return ""
    if isinstance(key, int):
        return f"[{key}]"
    return "[" + json.dumps(key) + "]"


def instances(spec):
    if spec is None:
        return [None]
    if isinstance(spec, int):
        return list(range(spec))
    return list(spec)


# How the action of one instance is picked, with its weight (per 1000).
ACTIONS = [
    ("no-op", 800),
    ("update", 120),
    ("replace", 25),
    ("replace-cbd", 10),
    ("delete", 20),
    ("create", 15),
    ("forget", 5),
    ("read", 5),
]

REPLACE_PATHS = {
    "docker_volume": ["name"],
    "docker_container": ["image"],
    "docker_image": ["name"],
    "docker_network": ["name"],
    "aws_ebs_volume": ["availability_zone"],
    "aws_instance": ["ami"],
    "aws_security_group_rule": ["cidr_blocks"],
    "aws_iam_role_policy_attachment": ["policy_arn"],
    "aws_route53_record": ["name"],
    "random_password": ["length"],
    "local_file": ["content"],
    "aws_cloudwatch_log_group": ["name"],
    "aws_s3_object": ["key"],
    "abode_protect": ["resource_id"],
}


def pick_action(rng: random.Random) -> str:
    roll = rng.randrange(1000)
    for action, weight in ACTIONS:
        if roll < weight:
            return action
        roll -= weight
    return "no-op"


def changed(values: dict, rtype: str, rng: random.Random) -> dict:
    """An in-place update: tags or a label changes, as most real updates do."""
    after = json.loads(json.dumps(values))
    if "tags" in after and isinstance(after["tags"], dict):
        after["tags"]["abode.template_version"] = "v15"
        after["tags_all"]["abode.template_version"] = "v15"
    elif "labels" in after:
        after["labels"] = after["labels"] + [{"label": "abode.updated", "value": "true"}]
    elif rtype == "random_password":
        after["keepers"] = {"rotation": "2026-q4"}
    else:
        after["description" if "description" in after else "id"] = f"{after.get('id')}-v15"
    return after


COMPUTED = {"id", "arn", "mountpoint", "image_id", "repo_digest", "network_data", "etag", "version_id", "bcrypt_hash", "result", "fqdn", "private_dns", "private_ip", "primary_network_interface_id", "security_group_rule_id"}


def unknown_after(values: dict) -> tuple[dict, dict]:
    """For a new object: computed attributes become unknown (absent from after)."""
    after = {k: v for k, v in values.items() if k not in COMPUTED}
    unknown = {k: True for k in values if k in COMPUTED}
    return after, unknown


def write_plan(out, workspaces: int, tags: int) -> int:
    rng = random.Random(20261129)
    fleet = Fleet(rng, tags)
    ws_keys = [f"ws-{i:04d}" for i in range(workspaces)]

    planned_modules = []
    prior_modules = []
    changes = []
    drift = []
    count = 0
    for ws in ws_keys:
        module = f'module.workspace["{ws}"]'
        planned_resources = []
        prior_resources = []
        for rtype, name, spec, provider in KINDS:
            for key in instances(spec):
                count += 1
                local = f"{rtype}.{name}{instance_suffix(key)}"
                address = f"{module}.{local}"
                values, sens = fleet.values(rtype, ws, key)
                action = pick_action(rng)
                if rtype == "abode_protect" and action not in ("no-op", "update"):
                    action = "no-op"
                mode = "managed"
                if action == "read":
                    mode = "data"
                # Order of keys as Terraform prints them.
                entry = {
                    "address": address if mode == "managed" else f"{module}.data.{local}",
                    "module_address": module,
                    "mode": mode,
                    "type": rtype,
                    "name": name,
                    **({"index": key} if key is not None else {}),
                    "provider_name": PROVIDERS[provider],
                }
                change: dict
                reason = None
                planned = None
                prior = values
                if action == "no-op":
                    change = {"actions": ["no-op"], "before": values, "after": values, "after_unknown": {}, "before_sensitive": sens, "after_sensitive": sens}
                    planned = values
                elif action == "update":
                    after = changed(values, rtype, rng)
                    change = {"actions": ["update"], "before": values, "after": after, "after_unknown": {}, "before_sensitive": sens, "after_sensitive": sens}
                    planned = after
                elif action in ("replace", "replace-cbd"):
                    after, unknown = unknown_after(values)
                    path = REPLACE_PATHS[rtype]
                    if path[0] in after:
                        after[path[0]] = f"{after[path[0]]}-v15" if isinstance(after[path[0]], str) else after[path[0]]
                    change = {
                        "actions": ["delete", "create"] if action == "replace" else ["create", "delete"],
                        "before": values,
                        "after": after,
                        "after_unknown": unknown,
                        "before_sensitive": sens,
                        "after_sensitive": sens,
                        "replace_paths": [path],
                    }
                    reason = rng.choice(["replace_because_cannot_update"] * 4 + ["replace_by_request", "replace_because_tainted"])
                    planned = after
                elif action == "delete":
                    change = {"actions": ["delete"], "before": values, "after": None, "after_unknown": {}, "before_sensitive": sens, "after_sensitive": False}
                    if isinstance(key, int):
                        reason = "delete_because_count_index"
                    elif isinstance(key, str):
                        reason = "delete_because_each_key"
                    else:
                        reason = "delete_because_no_resource_config"
                elif action == "forget":
                    change = {"actions": ["forget"], "before": values, "after": None, "after_unknown": {}, "before_sensitive": sens, "after_sensitive": False}
                    reason = "delete_because_no_resource_config"
                elif action == "create":
                    after, unknown = unknown_after(values)
                    change = {"actions": ["create"], "before": None, "after": after, "after_unknown": unknown, "before_sensitive": False, "after_sensitive": sens}
                    planned = after
                    prior = None
                else:  # read
                    after, unknown = unknown_after(values)
                    change = {"actions": ["read"], "before": None, "after": after, "after_unknown": unknown, "before_sensitive": False, "after_sensitive": sens}
                    reason = "read_because_dependency_pending"
                    planned = after
                    prior = None
                entry["change"] = change
                if reason:
                    entry["action_reason"] = reason
                changes.append(DUMPS(entry))

                if action in ("update", "replace") and rng.randrange(10) == 0:
                    drifted = json.loads(json.dumps(values))
                    drifted_key = "tags" if "tags" in drifted else "id"
                    if drifted_key == "tags":
                        drifted["tags"] = dict(drifted["tags"], **{"backup-policy": "weekly"})
                    else:
                        drifted["id"] = f"{drifted['id']}-restored"
                    drift_entry = {k: v for k, v in entry.items() if k not in ("change", "action_reason")}
                    drift_entry["change"] = {"actions": ["update"], "before": values, "after": drifted, "after_unknown": {}, "before_sensitive": sens, "after_sensitive": sens}
                    drift.append(DUMPS(drift_entry))

                resource_doc = {
                    "address": entry["address"],
                    "mode": mode,
                    "type": rtype,
                    "name": name,
                    **({"index": key} if key is not None else {}),
                    "provider_name": PROVIDERS[provider],
                    "schema_version": 0,
                }
                if planned is not None and action not in ("delete", "forget"):
                    planned_resources.append(DUMPS(dict(resource_doc, values=planned, sensitive_values=sens)))
                if prior is not None:
                    prior_resources.append(DUMPS(dict(resource_doc, values=prior, sensitive_values=sens)))
        planned_modules.append('{"resources":[' + ",".join(planned_resources) + '],"address":' + DUMPS(module) + "}")
        prior_modules.append('{"resources":[' + ",".join(prior_resources) + '],"address":' + DUMPS(module) + "}")

    configuration = build_configuration()
    variables = {"db_admin_password": {"value": "s3cr3t-bench-password"}, "region": {"value": "eu-west-1"}}
    out.write('{"format_version":"1.2","terraform_version":"1.11.4","variables":' + DUMPS(variables))
    out.write(',"planned_values":{"root_module":{"child_modules":[')
    out.write(",".join(planned_modules))
    out.write("]}}")
    out.write(',"resource_drift":[' + ",".join(drift) + "]")
    out.write(',"resource_changes":[' + ",".join(changes) + "]")
    out.write(',"prior_state":{"format_version":"1.0","terraform_version":"1.11.4","values":{"root_module":{"child_modules":[')
    out.write(",".join(prior_modules))
    out.write("]}}}")
    out.write(',"configuration":' + DUMPS(configuration))
    out.write(',"relevant_attributes":' + DUMPS([{"resource": f'module.workspace["{ws}"].docker_volume.home', "attribute": ["id"]} for ws in ws_keys]))
    out.write(',"timestamp":"2026-11-29T12:00:00Z","applyable":true,"complete":true,"errored":false}')
    return count


def build_configuration() -> dict:
    resources = []
    for rtype, name, spec, provider in KINDS:
        expressions: dict = {"name": {"references": ["var.workspace", "each.key"]}}
        if rtype == "abode_protect":
            expressions = {"resource_id": {"references": ["docker_volume.home.id", "docker_volume.home"]}}
        elif rtype == "docker_container":
            expressions = {
                "image": {"references": ["docker_image.main.image_id", "docker_image.main"]},
                "volumes": [{"volume_name": {"references": ["docker_volume.home.name", "docker_volume.home"]}, "container_path": {"constant_value": "/home/coder"}}],
            }
        resource = {
            "address": f"{rtype}.{name}",
            "mode": "managed",
            "type": rtype,
            "name": name,
            "provider_config_key": provider,
            "expressions": expressions,
            "schema_version": 0,
        }
        if isinstance(spec, int):
            resource["count_expression"] = {"references": ["var.start_count"]} if rtype == "docker_container" else {"constant_value": spec}
        elif isinstance(spec, list):
            resource["for_each_expression"] = {"constant_value": spec}
        resources.append(resource)
    return {
        "provider_config": {
            p: {"name": p, "full_name": full} for p, full in PROVIDERS.items()
        },
        "root_module": {
            "module_calls": {
                "workspace": {
                    "source": "./modules/workspace",
                    "for_each_expression": {"references": ["var.workspaces"]},
                    "expressions": {"workspace": {"references": ["each.key"]}},
                    "module": {
                        "resources": resources,
                        "outputs": {"home_volume_id": {"expression": {"references": ["docker_volume.home.id", "docker_volume.home"]}}},
                        "variables": {"workspace": {}, "start_count": {"default": 1}},
                    },
                }
            },
            "variables": {"db_admin_password": {"sensitive": True}, "region": {"default": "eu-west-1"}, "workspaces": {}},
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--workspaces", type=int, default=500, help="module instances, 30 resources each")
    parser.add_argument("--tags", type=int, default=3, help="extra tags per tagged resource (tunes the size)")
    args = parser.parse_args()
    with open(args.output, "w", encoding="utf-8") as out:
        count = write_plan(out, args.workspaces, args.tags)
        size = out.tell()
    print(f"wrote {args.output}: {count} resources, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
