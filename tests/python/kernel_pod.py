"""Enterprise Gateway's own Kubernetes launcher, run against a recording
stand-in for the Kubernetes API (no cluster runs here), with the mahtab
kernelspec `mahtab install --gateway kubernetes` wrote. Run by
.venv-gateway's Python, which has the gateway, jinja2 and the kubernetes
client.

    kernel_pod.py render KERNELSPEC_DIR KERNEL_ID PORT_RANGE RESPONSE_ADDRESS PUBLIC_KEY
        prints the pod the launcher would create, as JSON, after checking it
        with the kubernetes client's own V1Pod model
    kernel_pod.py run KERNELSPEC_DIR DOCKERFILE MAHTAB PYTHON KERNEL_ID PORT_RANGE RESPONSE_ADDRESS PUBLIC_KEY
        renders the pod the same way, then runs the image's command (the
        Dockerfile's CMD, with the binary and Python of this machine) with
        exactly the pod's environment: the kernel the pod would start, on
        this host
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kubernetes import client, config
from traitlets.utils.importstring import import_item

# The gateway's Kubernetes modules read the cluster's configuration when
# imported and launched; there is none here.
config.load_incluster_config = lambda *args, **kwargs: None
config.load_kube_config = lambda *args, **kwargs: None


class RecordingCoreApi:
    """Takes the objects the launcher creates instead of a cluster."""

    created: list[dict] = []

    def __init__(self, *args, **kwargs) -> None:
        pass

    def create_namespaced_pod(self, namespace: str, body: dict):
        self.created.append(body)
        return client.V1Pod(metadata=client.V1ObjectMeta(name=body["metadata"]["name"]))


def render(spec_dir: Path, kernel_id: str, port_range: str, response_address: str, public_key: str) -> dict:
    spec = json.loads((spec_dir / "kernel.json").read_text())
    proxy = spec["metadata"]["process_proxy"]
    # The gateway's own class for the kernelspec's process proxy.
    proxy_class = import_item(proxy["class_name"])
    from enterprise_gateway.services.processproxies.k8s import KubernetesProcessProxy

    assert issubclass(proxy_class, KubernetesProcessProxy), proxy_class
    # What the gateway's KubernetesProcessProxy puts in the launcher's
    # environment before it runs the kernelspec's argv.
    os.environ.update({
        "KERNEL_IMAGE": proxy["config"]["image_name"],
        "KERNEL_EXECUTOR_IMAGE": proxy["config"]["image_name"],
        "KERNEL_POD_NAME": f"mahtab-{kernel_id}",
        "KERNEL_NAMESPACE": "default",
        "KERNEL_SERVICE_ACCOUNT_NAME": "default",
        "KERNEL_UID": "1000",
        "KERNEL_GID": "100",
        "KERNEL_USERNAME": "alice",
    })
    scripts = spec_dir / "scripts"
    assert Path(spec["argv"][1]) == scripts / "launch_kubernetes.py", spec["argv"]
    sys.path.insert(0, str(scripts))
    import launch_kubernetes

    launch_kubernetes.client.CoreV1Api = RecordingCoreApi
    launch_kubernetes.launch_kubernetes_kernel(
        kernel_id, port_range, response_address, public_key, "none", None, None, None
    )
    (pod,) = RecordingCoreApi.created
    # The kubernetes client's own model of a pod takes it as it is.
    checked = client.ApiClient()._ApiClient__deserialize(pod, "V1Pod")
    assert checked.spec.containers[0].image == proxy["config"]["image_name"]
    return pod


def image_command(dockerfile: Path) -> list[str]:
    for line in dockerfile.read_text().splitlines():
        if line.startswith("CMD "):
            return json.loads(line.removeprefix("CMD "))
    raise SystemExit(f"no CMD in {dockerfile}")


def main() -> None:
    mode, spec_dir = sys.argv[1], Path(sys.argv[2])
    if mode == "render":
        print(json.dumps(render(spec_dir, *sys.argv[3:7])))
        return
    dockerfile, mahtab, python = sys.argv[3:6]
    pod = render(spec_dir, *sys.argv[6:10])
    container = pod["spec"]["containers"][0]
    assert "command" not in container and "args" not in container, "the image's own command runs"
    env = {item["name"]: item["value"] for item in container["env"]}
    # The image's binary and Python are this machine's; the system's PATH
    # finds tini and the like in the image, here nothing else is needed.
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    env["HOME"] = os.environ.get("HOME", "/root")
    paths = {"/usr/local/bin/mahtab": mahtab, "/opt/mahtab-env/bin/python": python}
    command = [paths.get(arg, arg) for arg in image_command(Path(dockerfile))]
    os.execve(command[0], command, env)


if __name__ == "__main__":
    main()
