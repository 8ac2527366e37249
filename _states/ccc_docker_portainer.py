"""
State ``ccc_docker_portainer``: the Portainer agent container of a node, through the Docker SDK.

.. code-block:: yaml

    ccc-cluster-docker-portainer-agent:
      ccc_docker_portainer.agent:
        - name: portainer-agent
        - enabled: true
        - image: portainer/agent:2.21.4
        - publish_ip: 127.0.0.1
        - publish_port: 9001

The container is compared with what pillar wants (image and the image id its tag points to, the
published address, the two mounts, restart ``always``, ``AGENT_SECRET``, running) and recreated
when anything differs; ``enabled: false`` removes it. Only a container carrying ``ROLE_LABEL``
is ever changed or removed: a foreign container of the same name makes the state fail.

``AGENT_SECRET`` comes from ``ccc:secrets:portainer:agent_secret`` when set. This is the one
place a secret goes into a container's environment, because the agent image reads it only
there; it is readable by whoever can inspect containers on the node (Docker access is root
anyway). It never appears in ``changes`` or comments: a changed secret is reported as
"AGENT_SECRET changed".
"""

import ccc_engine
import ccc_pillar
import ccc_secrets
import ccc_state_ret

__virtualname__ = "ccc_docker_portainer"
ROLE_LABEL = "ccc.cluster-role"
ROLE_VALUE = "docker-portainer-agent"
AGENT_PORT = "9001/tcp"
BINDS = ["/var/run/docker.sock:/var/run/docker.sock", "/var/lib/docker/volumes:/var/lib/docker/volumes"]


def __virtual__():
    return __virtualname__


def _node():
    return ccc_pillar.node_settings(ccc_pillar.pillar_ccc(__pillar__), __grains__["id"])


def _secret():
    """The agent secret, or ``None`` when pillar has none (``InvalidSecret`` for an unusable one)."""
    try:
        return ccc_secrets.lookup({"ccc": ccc_pillar.pillar_ccc(__pillar__)}, "portainer", "agent_secret")
    except ccc_secrets.MissingSecret:
        return None


def _image_id(client, image):
    try:
        return client.api.inspect_image(image)["Id"]
    except ccc_engine.docker.errors.ImageNotFound:
        return None


def differences(attrs, image, image_id, publish_ip, publish_port, secret):
    """What differs between the inspected container and the wanted one (names only, no values
    of the secret)."""
    config, host = attrs.get("Config") or {}, attrs.get("HostConfig") or {}
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    ports = (host.get("PortBindings") or {}).get(AGENT_PORT) or [{}]
    found = []
    if config.get("Image") != image or (image_id and attrs.get("Image") != image_id):
        found.append(f"image {config.get('Image')} -> {image}")
    if (ports[0].get("HostIp"), ports[0].get("HostPort")) != (publish_ip, str(publish_port)):
        found.append(f"published at {ports[0].get('HostIp')}:{ports[0].get('HostPort')} -> {publish_ip}:{publish_port}")
    if sorted(host.get("Binds") or []) != sorted(BINDS):
        found.append("mounts")
    if (host.get("RestartPolicy") or {}).get("Name") != "always":
        found.append("restart policy")
    if env.get("AGENT_SECRET") != secret:
        found.append("AGENT_SECRET changed")
    if not (attrs.get("State") or {}).get("Running"):
        found.append("not running")
    return found


def _create(client, name, image, publish_ip, publish_port, secret):
    host_config = client.api.create_host_config(
        binds=BINDS, port_bindings={9001: (publish_ip, int(publish_port))},
        restart_policy={"Name": "always"})
    created = client.api.create_container(
        image, name=name, environment={"AGENT_SECRET": secret} if secret else None, ports=[9001],
        host_config=host_config, labels={ROLE_LABEL: ROLE_VALUE})
    client.api.start(created["Id"])


def agent(name, enabled=False, image="portainer/agent:latest", publish_ip="127.0.0.1", publish_port=9001):
    """The agent container ``name`` runs as configured (``enabled``), or is gone."""
    node = _node()
    client = ccc_engine.client(node)
    try:
        return _agent(client, name, enabled, image, publish_ip, publish_port)
    except ccc_secrets.InvalidSecret as exc:
        return ccc_state_ret.result(name, False, {}, str(exc))
    except Exception as exc:
        problem = ccc_engine.engine_problem(exc, node["docker_url"])
        if problem is None:
            raise
        return ccc_state_ret.result(name, False, {}, ccc_secrets.mask(problem, ccc_secrets.values({"ccc": ccc_pillar.pillar_ccc(__pillar__)})))
    finally:
        client.close()


def _agent(client, name, enabled, image, publish_ip, publish_port):
    test = bool(__opts__["test"])
    attrs = ccc_engine.inspect(client, name)
    if attrs and ccc_engine.labels(attrs).get(ROLE_LABEL) != ROLE_VALUE:
        return ccc_state_ret.result(name, False, {}, f"a container named {name} exists that ccc-salt did not create; left alone")
    if not enabled:
        if not attrs:
            return ccc_state_ret.result(name, True, {}, "portainer agent is off")
        if not test:
            client.api.remove_container(attrs["Id"], force=True)
        return ccc_state_ret.result(name, None if test else True, {"removed": name},
                       f"portainer agent {name} {'would be' if test else 'was'} removed (switched off)")
    secret = _secret()
    image_id = _image_id(client, image)
    if image_id is None and not test:
        client.images.pull(image)
        image_id = _image_id(client, image)
    found = differences(attrs, image, image_id, publish_ip, publish_port, secret) if attrs else ["created"]
    if not found:
        return ccc_state_ret.result(name, True, {}, f"portainer agent {name} runs as configured")
    changes = {"agent": found}
    if test:
        return ccc_state_ret.result(name, None, changes, f"portainer agent {name} would be {'created' if not attrs else 'recreated'}")
    if attrs:
        client.api.remove_container(attrs["Id"], force=True)
    _create(client, name, image, publish_ip, publish_port, secret)
    return ccc_state_ret.result(name, True, changes, f"portainer agent {name} {'created' if not attrs else 'recreated'}")
