"""Neo4j Browser support: the graph's style (GraSS) and ready Cypher queries."""
